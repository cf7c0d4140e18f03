package algo

import "fmt"

// tokenBucket holds Burst tokens, refilled at Count per Period ms. State: A
// = the deficit D = full − tokens in units (or a debt, tokenDeficit), B =
// the last update L (Unix ms), C = 1 once charged (A = 0 is a full bucket
// that was charged and refilled, not idle).
var tokenBucket = Algorithm{
	Kind: TokenBucket, Name: "token_bucket", Label: "token bucket", Code: "tb", Listed: 2,
	Fields: []string{"rate", "burst"}, Required: []string{"rate", "burst"},
	MaxCount: MaxCount, MinBurst: 1, Bucket: true, Quota: QuotaBurst, Slices: SliceBucket,
	params: tokenParams,
}

// tokenBucketOp performs operation o of the token bucket (Limit.run).
func tokenBucketOp(o op, l *Limit, d *Decision, s *State, now, cost int64, lease string) int64 {
	switch o {
	case opDecide:
		tokenDecide(l, d, s, now, cost, lease)
	case opRefund:
		tokenRefund(l, s, now, cost, lease)
	case opCharge:
		tokenCharge(l, s, now, cost)
	case opIdle:
		return tokenIdle(l, s, now)
	}
	return 0
}

// tokenDecide takes cost tokens if there are that many.
func tokenDecide(l *Limit, d *Decision, s *State, now, c int64, _ string) {
	p, r := l.Period, l.Count
	full := l.Burst * p
	t := l.tokenLevel(s, now)
	if t < c*p {
		*d = Decision{
			Remaining:  max(t, 0) / p,
			RetryAfter: ceilDiv(c*p-t, r),
			ResetAfter: ceilDiv(full-t, r),
		}
		return
	}
	level := t - c*p
	if c > 0 {
		s.A, s.B, s.C = full-level, max(s.B, now), 1
	}
	*d = Decision{Allowed: true, Remaining: level / p, ResetAfter: ceilDiv(full-level, r)}
}

// tokenLevel is the token bucket's tokens T' at now in units (B·Period is
// full and idle; below 0 while a debt left by ForceCharge is repaid). The
// state keeps the deficit D = tokens taken and not yet refilled, not the
// tokens, so a reload that raises the burst admits at once and one that
// lowers it may refuse at once (docs/CONTRACT.md "Reload"), as nginx's
// stored excess does; a deficit beyond the capacity empties the bucket.
func (l *Limit) tokenLevel(s *State, now int64) int64 {
	full := l.Burst * l.Period
	if s.C == 0 {
		return full
	}
	d := tokenDeficit(s, full) // a lowered burst: empty, not in debt; a debt stays
	el := max(now-s.B, 0)
	el = min(el, ceilDiv(d, l.Count))
	return full - max(d-el*l.Count, 0)
}

// tokenRefund gives the cost tokens back (deficit −= cost·Period), a debt
// first (floor 0: a full bucket).
func tokenRefund(l *Limit, s *State, _, cost int64, _ string) {
	if s.C == 0 {
		return
	}
	if s.A < 0 {
		full := l.Burst * l.Period
		s.A = encodeDeficit(max(tokenDeficit(s, full)-cost*l.Period, 0), full)
	} else { // a deficit a lowered burst clamps stays unclamped, as stored
		s.A = max(s.A-cost*l.Period, 0)
	}
}

// tokenCharge takes cost tokens, down to −Burst: below 0 is a debt that
// the refill repays before any request is accepted again. The debt is kept
// apart from the clamp that empties a bucket whose burst was lowered by a
// reload (tokenDeficit): the clamp never forgives a debt. A bucket in debt
// is empty at whatever burst it is read with: after a reload that raised
// the burst it refills from empty once its debt is repaid, until the
// store's expiry, set under the burst it was charged with, ends the state
// (a full bucket) — never before the debt is repaid.
func tokenCharge(l *Limit, s *State, now, c int64) {
	full := l.Burst * l.Period
	level := max(l.tokenLevel(s, now)-c*l.Period, -full)
	s.A, s.B, s.C = encodeDeficit(full-level, full), max(s.B, now), 1
}

// tokenIdle is when the bucket is full again.
func tokenIdle(l *Limit, s *State, now int64) int64 {
	if s.C == 0 {
		return 0
	}
	return now + ceilDiv(l.Burst*l.Period-l.tokenLevel(s, now), l.Count)
}

// tokenDeficit is a token bucket state's deficit at its last update, in
// units: tokens taken and not yet refilled, beyond the capacity full by a
// debt. The state keeps a plain deficit in A (≥ 0), which a lowered burst
// clamps to the capacity (the bucket is empty, not in debt), or a debt as
// A < 0: the bucket is empty and owes −A more (encodeDeficit), whatever
// the burst.
func tokenDeficit(s *State, full int64) int64 {
	if s.A < 0 {
		return full - s.A
	}
	return min(s.A, full)
}

// encodeDeficit is the A that tokenDeficit reads back as deficit d.
func encodeDeficit(d, full int64) int64 {
	if d > full {
		return full - d
	}
	return d
}

// tokenParams is "10 r/s (burst 20)".
func tokenParams(l *Limit) string {
	return fmt.Sprintf("%s (burst %d)", rateString(l.Count, l.Period), l.Burst)
}
