package algo

import "fmt"

// leakyBucket is nginx limit_req (GCRA) with exact rational arithmetic:
// excess drains at Count per Period ms; Burst excess requests are accepted,
// delayed unless NoDelay (or beyond Delay). State: A = the excess E in
// units, B = the last update L (Unix ms), C = 1 once charged (E = 0 is one
// request in flight, not idle).
var leakyBucket = Algorithm{
	Kind: LeakyBucket, Name: "leaky_bucket", Label: "leaky bucket", Code: "lb", Listed: 1,
	Fields: []string{"rate", "burst", "nodelay", "delay"}, Required: []string{"rate"},
	MaxCount: MaxCount, Bucket: true, Quota: QuotaBurstAndOne,
	NoSlice: "a delayed request's wait depends on the whole fleet's excess at its decision, which a local slice does not know (nodelay slices are not built yet)",
	params:  leakyParams,
}

// leakyBucketOp performs operation o of the leaky bucket (Limit.run).
func leakyBucketOp(o op, l *Limit, d *Decision, s *State, now, cost int64, lease string) int64 {
	switch o {
	case opDecide:
		leakyDecide(l, d, s, now, cost, lease)
	case opRefund:
		leakyRefund(l, s, now, cost, lease)
	case opCharge:
		leakyCharge(l, s, now, cost)
	case opIdle:
		return leakyIdle(l, s, now)
	}
	return 0
}

// leakyDecide adds cost requests of water if it stays within the burst.
func leakyDecide(l *Limit, d *Decision, s *State, now, c int64, _ string) {
	p, r := l.Period, l.Count
	bp := l.Burst * p
	x := l.leakyLevel(s, now)
	next := x + c*p
	if next > bp {
		*d = Decision{
			Remaining:  max(bp-x, 0) / p,
			RetryAfter: ceilDiv(next-bp, r),
			ResetAfter: ceilDiv(x+p, r),
		}
		return
	}
	*d = Decision{Allowed: true, Remaining: (bp - next) / p, ResetAfter: ceilDiv(next+p, r)}
	// A Delay ≥ Burst delays nothing (nginx); min keeps Delay·Period exact.
	if dp := min(l.Delay, l.Burst) * p; !l.NoDelay && next > dp {
		d.Wait = ceilDiv(next-dp, r)
	}
	if c > 0 {
		s.A, s.B, s.C = next, max(s.B, now), 1
	}
}

// leakyLevel is the leaky bucket's excess X at now in units (≥ -Period;
// -Period is idle). elapsed is clamped first so elapsed·Count stays small.
func (l *Limit) leakyLevel(s *State, now int64) int64 {
	p, r := l.Period, l.Count
	if s.C == 0 {
		return -p
	}
	el := max(now-s.B, 0)
	el = min(el, (s.A+p)/r+1)
	return max(s.A-el*r, -p)
}

// leakyRefund takes the cost requests' water out (floor −Period: an empty
// bucket).
func leakyRefund(l *Limit, s *State, _, cost int64, _ string) {
	if s.C != 0 {
		s.A = max(s.A-cost*l.Period, -l.Period)
	}
}

// leakyCharge adds cost requests of water, up to Burst + quota requests.
func leakyCharge(l *Limit, s *State, now, c int64) {
	next := min(l.leakyLevel(s, now)+c*l.Period, (2*l.Burst+1)*l.Period)
	s.A, s.B, s.C = next, max(s.B, now), 1
}

// leakyIdle is when the bucket is empty.
func leakyIdle(l *Limit, s *State, now int64) int64 {
	if s.C == 0 {
		return 0
	}
	return now + ceilDiv(l.leakyLevel(s, now)+l.Period, l.Count)
}

// leakyParams is "10 r/s (burst 20, nodelay)".
func leakyParams(l *Limit) string {
	mode := ""
	switch {
	case l.NoDelay:
		mode = ", nodelay"
	case l.Delay > 0:
		mode = fmt.Sprintf(", delay %d", l.Delay)
	}
	return fmt.Sprintf("%s (burst %d%s)", rateString(l.Count, l.Period), l.Burst, mode)
}
