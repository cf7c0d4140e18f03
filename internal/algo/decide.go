package algo

// State is one key's state for one Limit. The zero value is the idle state
// (empty bucket of excess, full token bucket, empty window/log, no lease), so
// missing state needs no special case.
//
// The meaning of A, B and C depends on the Kind: each algorithm's file
// says (fixed_window.go, token_bucket.go, …; docs/DESIGN.md has the
// arithmetic). The buckets need C because their zero A is not idle (E = 0
// is one request in flight; D = 0 is a full bucket that was charged and
// refilled). SlidingLog keeps Log and Concurrency keeps Leases; the others
// leave both nil.
type State struct {
	A, B, C int64
	// Log holds the Unix ms of accepted sliding-log requests, ascending; one
	// entry per request, so several may share a millisecond.
	Log []int64
	// Leases are the Concurrency leases held, in acquisition order.
	Leases []Lease
}

// Lease is one in-flight request counted by a Concurrency limit.
type Lease struct {
	// ID identifies the request (unique per request).
	ID string
	// Expiry is the Unix ms at which the lease stops counting.
	Expiry int64
}

// Decide returns the decision for a request of cost requests (0 peeks) at
// now (Unix ms) and, only when it is accepted with cost > 0, writes the new
// state into *s. A refused request, and any peek, leave *s unchanged.
//
// Decide never changes the elements visible through s.Log and s.Leases (it
// may append past their length, or replace the slices), so a caller may
// decide on a shallow copy of a State and keep either the copy or the
// original — one of them, not two diverging copies.
//
// cost must not exceed Quota(): such a request can never be accepted, and is
// refused with the peek's Remaining and ResetAfter and RetryAfter 0. For
// Concurrency, Decide has no lease to count and only peeks; use DecideLease.
func (l *Limit) Decide(s *State, now, cost int64) Decision {
	return l.DecideLease(s, now, cost, "")
}

// DecideLease is Decide with the lease id of the request, which Concurrency
// limits count (cost > 0 acquires or refreshes one lease, whatever the cost);
// the other kinds ignore lease.
func (l *Limit) DecideLease(s *State, now, cost int64, lease string) Decision {
	var d Decision
	l.DecideInto(&d, s, now, cost, lease)
	return d
}

// DecideInto is DecideLease writing the decision into *d (all of it). It
// is the memory store's hot path. Decision has five fields, one more than
// the Go compiler keeps in SSA registers (ssa.MaxStruct = 4), so a
// Decision returned by value is spilled to the stack and copied at each
// call level with 16-byte moves that read bytes just written by narrower
// stores: the CPU cannot forward those stores and stalls (measured: about
// 15 ns per single-check decision over the two levels DecideLease and the
// kind's function). The kinds' functions write *d in place for the same
// reason. An unknown Kind decides the zero Decision (refused).
func (l *Limit) DecideInto(d *Decision, s *State, now, cost int64, lease string) {
	a := Describe(l.Kind)
	switch {
	case a == nil:
		*d = Decision{}
	case !a.Leases && cost > a.Quota.quota(l):
		l.run(opDecide, d, s, now, 0, lease)
		d.Allowed, d.Wait = false, 0
	default:
		l.run(opDecide, d, s, now, cost, lease)
	}
}

// Refund undoes exactly the charge of cost requests that an accepted
// Decide wrote into *s at now (Unix ms), whatever other requests charged
// since; a later peek then sees the state as if that request had never
// been charged (up to the floors each algorithm's refund names). It is the
// Go twin of the Valkey script's refunds (refund_<name> in
// internal/store/valkey/lua/<name>.lua). cost ≤ 0 and an idle (never
// charged) state change nothing; Concurrency changes nothing without a
// lease (see RefundLease). Like Decide, Refund replaces s.Log and s.Leases
// rather than changing their elements.
func (l *Limit) Refund(s *State, now, cost int64) {
	l.RefundLease(s, now, cost, "")
}

// RefundLease is Refund with the request's lease id: a Concurrency limit
// drops that lease (leases already expired at now go too, as in
// State.Release); the other kinds ignore lease.
func (l *Limit) RefundLease(s *State, now, cost int64, lease string) {
	if cost > 0 {
		l.run(opRefund, nil, s, now, cost, lease)
	}
}

// ForceCharge adds cost requests to *s at now (Unix ms) unconditionally: no
// refusal, so a bucket may go into debt. It is the charge of a response's
// cost beyond what the request was charged when decided (a route's
// cost_response_header): the tokens were spent, whether or not they were
// there. It is the Go twin of the Valkey script's charges (charge_<name>
// in internal/store/valkey/lua/<name>.lua). The cost is capped at the
// quota first and each algorithm caps its state (a window's count at
// 2·Count, a bucket's debt at one quota, a log at Count live entries), so
// every value stays below 2^53 and an overdraw never owes more than one
// quota. cost ≤ 0 changes nothing, nor does it change Concurrency (it
// counts requests in flight, not cost).
func (l *Limit) ForceCharge(s *State, now, cost int64) {
	if cost > 0 {
		l.run(opCharge, nil, s, now, min(cost, l.Quota()), "")
	}
}
