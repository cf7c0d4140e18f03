package algo

// Refund undoes exactly the charge of cost requests that an accepted
// Decide wrote into *s at now (Unix ms), whatever other requests charged
// since; a later peek then sees the state as if that request had never
// been charged (up to the floors below). It is the Go twin of the Valkey
// refund script (internal/store/valkey/lua/refund.lua) and does what it
// does, kind by kind:
//
//	FixedWindow   n -= cost if s is still in now's window (floor 0)
//	SlidingLog    drop cost entries at exactly now
//	SlidingWindow curr -= cost in now's window, or prev -= cost once the
//	              window moved on by one (floor 0)
//	TokenBucket   deficit -= cost·Period, a debt first (floor 0: a full bucket)
//	LeakyBucket   excess -= cost·Period (floor −Period: an empty bucket)
//	Concurrency   nothing without a lease (see RefundLease)
//
// cost ≤ 0 and an idle (never charged) state change nothing. Like Decide,
// Refund replaces s.Log and s.Leases rather than changing their elements.
func (l *Limit) Refund(s *State, now, cost int64) {
	l.RefundLease(s, now, cost, "")
}

// RefundLease is Refund with the request's lease id: a Concurrency limit
// drops that lease (leases already expired at now go too, as in
// State.Release); the other kinds ignore lease.
func (l *Limit) RefundLease(s *State, now, cost int64, lease string) {
	if cost <= 0 {
		return
	}
	p := l.Period
	switch l.Kind {
	case FixedWindow:
		if cw, _, _, _, _, _ := l.window(now); s.A == cw {
			s.B = max(s.B-cost, 0)
		}
	case SlidingLog:
		// Entries at now are indistinguishable: drop cost of them.
		hi := countLE(s.Log, now)
		lo := countLE(s.Log, now-1)
		n := min(int64(hi-lo), cost)
		if n == 0 {
			return
		}
		out := make([]int64, 0, int64(len(s.Log))-n)
		out = append(out, s.Log[:hi-int(n)]...)
		out = append(out, s.Log[hi:]...)
		if len(out) == 0 {
			out = nil
		}
		s.Log = out
	case SlidingWindow:
		switch cw, _, next, _, _, _ := l.window(now); s.A {
		case cw:
			s.B = max(s.B-cost, 0)
		case next:
			s.C = max(s.C-cost, 0)
		}
	case TokenBucket:
		if s.C != 0 { // a debt is repaid first (tokenDeficit)
			full := l.Burst * p
			if s.A < 0 {
				s.A = encodeDeficit(max(tokenDeficit(s, full)-cost*p, 0), full)
			} else {
				s.A = max(s.A-cost*p, 0)
			}
		}
	case LeakyBucket:
		if s.C != 0 {
			s.A = max(s.A-cost*p, -p)
		}
	case Concurrency:
		if lease != "" {
			s.Release(lease, now)
		}
	}
}
