package algo

// ForceCharge adds cost requests to *s at now (Unix ms) unconditionally: no
// refusal, so a bucket may go into debt. It is the charge of a response's
// cost beyond what the request was charged when decided (a route's
// cost_response_header): the tokens were spent, whether or not they were
// there. It is the Go twin of the Valkey charge script
// (internal/store/valkey/lua/charge.lua), kind by kind:
//
//	TokenBucket   tokens −= cost, down to −Burst: below 0 is a debt that
//	              the refill repays before any request is accepted again
//	LeakyBucket   excess += cost, up to Burst + Quota requests
//	FixedWindow   n += cost in now's window, up to 2·Count
//	SlidingWindow curr += cost in now's window, up to 2·Count
//	SlidingLog    cost entries at now, up to Count live entries (the log's
//	              memory stays bounded by the limit)
//	Concurrency   nothing (it counts requests in flight, not cost)
//
// The caps bound the arithmetic (every value stays below 2^53) and the
// state: an overdraw never owes more than one quota. cost ≤ 0 changes
// nothing. A token bucket's debt is kept apart from the clamp that empties
// a bucket whose burst was lowered by a reload (tokenDeficit): the clamp
// never forgives a debt. A bucket in debt is empty at whatever burst it is
// read with: after a reload that raised the burst it refills from empty
// once its debt is repaid, until the store's expiry, set under the burst
// it was charged with, ends the state (a full bucket) — never before the
// debt is repaid.
func (l *Limit) ForceCharge(s *State, now, cost int64) {
	if cost <= 0 {
		return
	}
	c := min(cost, l.Quota())
	p := l.Period
	switch l.Kind {
	case TokenBucket:
		full := l.Burst * p
		level := max(l.tokenLevel(s, now)-c*p, -full)
		s.A, s.B, s.C = encodeDeficit(full-level, full), max(s.B, now), 1
	case LeakyBucket:
		next := min(l.leakyLevel(s, now)+c*p, (l.Burst+l.Quota())*p)
		s.A, s.B, s.C = next, max(s.B, now), 1
	case FixedWindow:
		cw, _, _, _, _, _ := l.window(now)
		n := int64(0)
		if s.A == cw {
			n = s.B
		}
		s.A, s.B = cw, min(n+c, 2*l.Count)
	case SlidingWindow:
		cw, pw, _, _, _, _ := l.window(now)
		var curr, prev int64
		switch s.A {
		case cw:
			curr, prev = s.B, s.C
		case pw:
			prev = s.B
		}
		s.A, s.B, s.C = cw, min(curr+c, 2*l.Count), prev
	case SlidingLog:
		live := s.Log[countLE(s.Log, now-p):]
		if n := min(c, l.Count-int64(len(live))); n > 0 {
			s.Log = insertTimes(live, now, n)
		} else {
			s.Log = live
		}
	}
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
