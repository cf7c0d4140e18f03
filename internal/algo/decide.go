package algo

import (
	"math/bits"
	"slices"
)

// State is one key's state for one Limit. The zero value is the idle state
// (empty bucket of excess, full token bucket, empty window/log, no lease), so
// missing state needs no special case.
//
// The meaning of A, B and C depends on the Kind (see docs/DESIGN.md):
//
//	LeakyBucket   A = excess E (units), B = last L (Unix ms), C = 1 once charged
//	TokenBucket   A = deficit D = full − tokens (units), B = last L (Unix ms), C = 1 once charged
//	FixedWindow   A = window index w (now/Period), B = count n (requests)
//	SlidingWindow A = window index w, B = current count, C = previous count
//
// The buckets need C because their zero A is not idle (E = 0 is one request
// in flight; D = 0 is a full bucket that was charged and refilled). SlidingLog keeps Log and Concurrency
// keeps Leases; the others leave both nil.
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
// kind's function). The kinds below write *d in place for the same reason.
func (l *Limit) DecideInto(d *Decision, s *State, now, cost int64, lease string) {
	if l.Kind == Concurrency {
		if lease == "" {
			cost = 0
		}
		l.concurrency(d, s, now, cost, lease)
		return
	}
	if cost > l.Quota() {
		l.DecideInto(d, s, now, 0, lease)
		d.Allowed, d.Wait = false, 0
		return
	}
	switch l.Kind {
	case LeakyBucket:
		l.leaky(d, s, now, cost)
	case TokenBucket:
		l.token(d, s, now, cost)
	case FixedWindow:
		l.fixed(d, s, now, cost)
	case SlidingWindow:
		l.slidingWindow(d, s, now, cost)
	case SlidingLog:
		l.slidingLog(d, s, now, cost)
	default:
		*d = Decision{}
	}
}

// ceilDiv is ceil(a/b) for a ≥ 0, b > 0 (DESIGN: floor((a+b-1)/b)).
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

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

// leaky is nginx limit_req (GCRA) with exact rational arithmetic.
func (l *Limit) leaky(d *Decision, s *State, now, c int64) {
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

// tokenLevel is the token bucket's tokens T' at now in units (B·Period is
// full and idle; below 0 while a debt left by ForceCharge is repaid). The state keeps the deficit D = tokens taken and not yet
// refilled, not the tokens, so a reload that raises the burst admits at
// once and one that lowers it may refuse at once (docs/CONTRACT.md "Reload"),
// as nginx's stored excess does; a deficit beyond the capacity empties the
// bucket.
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

// token is the token bucket: capacity Burst, refilled at Count per Period.
func (l *Limit) token(d *Decision, s *State, now, c int64) {
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

// fixed is the fixed window: Count requests per epoch-aligned window or
// calendar period.
func (l *Limit) fixed(d *Decision, s *State, now, c int64) {
	w := l.Period
	cw := now / w
	el := now - cw*w
	if l.Calendar != nil { // written out: l.window does not inline
		cw, _, _, el, w, _ = l.Calendar.window(now)
	}
	n := int64(0)
	if s.A == cw {
		n = s.B
	}
	reset := w - el
	if n+c > l.Count {
		*d = Decision{Remaining: max(l.Count-n, 0), RetryAfter: reset, ResetAfter: reset}
		return
	}
	if c > 0 {
		s.A, s.B = cw, n+c
	}
	*d = Decision{Allowed: true, Remaining: l.Count - n - c, ResetAfter: reset}
}

// slidingWindow is the sliding window counter (Cloudflare 2017) on
// epoch-aligned windows of Period ms or calendar periods.
func (l *Limit) slidingWindow(d *Decision, s *State, now, c int64) {
	w := l.Period
	cw := now / w
	pw, el, wn := cw-1, now-cw*w, w
	if l.Calendar != nil { // written out: l.window does not inline
		cw, pw, _, el, w, wn = l.Calendar.window(now)
	}
	var curr, prev int64
	switch s.A {
	case cw:
		curr, prev = s.B, s.C
	case pw:
		prev = s.B
	}
	if l.slidingCount(d, curr, prev, el, w, wn, c) && c > 0 {
		s.A, s.B, s.C = cw, curr+c, prev
	}
}

// slidingCount decides the sliding window counter at el ms into a window
// of w ms followed by one of wn ms (they differ for calendar periods), with
// curr counted in this window and prev in the one before, and reports
// whether it accepted. The estimate prev·(w−el)/w + curr, taken before
// counting, must stay below Count: as prev·(w−el)/w + curr + c − 1 <
// Count with integers, floor(prev·(w−el)/w) < Count − curr − c + 1.
// mulDiv keeps that exact without forming Count·w.
func (l *Limit) slidingCount(d *Decision, curr, prev, el, w, wn, c int64) bool {
	floor, frac := mulDiv(prev, w-el, w)
	ceil := floor + boolInt(frac) // whole requests of prev still counted
	reset := w - el
	if floor+curr+c-1 < l.Count {
		*d = Decision{Allowed: true, Remaining: max(l.Count-curr-c-ceil, 0), ResetAfter: reset}
		return true
	}
	*d = Decision{Remaining: max(l.Count-curr-ceil, 0), RetryAfter: l.slidingRetry(el, w, wn, curr, prev, c), ResetAfter: reset}
	return false
}

// slidingRetry is the sliding window counter's ms until a refused request of
// cost c would be accepted, at el ms into the current window of w ms
// followed by one of wn ms.
func (l *Limit) slidingRetry(el, w, wn, curr, prev, c int64) int64 {
	// Later in this window: the first el' with prev·(w−el')/w < k, k =
	// Count − curr − c + 1, i.e. el' > (prev−k)·w/prev. Refused at el, so
	// prev ≥ k.
	if k := l.Count - curr - c + 1; k > 0 {
		q, _ := mulDiv(prev-k, w, prev)
		if e := q + 1; e < w {
			return e - el
		}
	}
	// In the next window prev' = curr, curr' = 0: the first e with
	// curr·(wn−e)/wn < k2 = Count − c + 1 (≥ 1 because c ≤ Count, so curr
	// = 0 always takes the first case).
	k2 := l.Count - c + 1
	e := int64(0)
	if curr >= k2 {
		q, _ := mulDiv(curr-k2, wn, curr)
		e = q + 1
	}
	if e < wn {
		return w - el + e
	}
	return w - el + wn
}

// mulDiv is floor(a·b/d) and whether a·b is not a multiple of d, for a,
// b ≥ 0 and d > 0 with a ≤ d or b ≤ d (so the quotient fits in 64 bits):
// the 128-bit product of math/bits, so a count times a window in ms
// (10^12 · 3.2·10^10) is never formed in an int64. The Lua twin is
// prelude.lua's muldiv.
func mulDiv(a, b, d int64) (q int64, frac bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi == 0 { // the common case: a 64-bit division is cheaper
		return int64(lo / uint64(d)), lo%uint64(d) != 0
	}
	qq, r := bits.Div64(hi, lo, uint64(d))
	return int64(qq), r != 0
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// slidingLog keeps every accepted request's ms for Period ms.
func (l *Limit) slidingLog(d *Decision, s *State, now, c int64) {
	w := l.Period
	// Entries t ≤ now − W have left the window.
	live := s.Log[countLE(s.Log, now-w):]
	n := int64(len(live))
	reset := int64(0)
	if n > 0 {
		reset = live[n-1] + w - now
	}
	if n+c > l.Count {
		k := n + c - l.Count
		*d = Decision{Remaining: max(l.Count-n, 0), RetryAfter: live[k-1] + w - now, ResetAfter: reset}
		return
	}
	if c > 0 {
		s.Log = insertTimes(live, now, c)
		reset = s.Log[len(s.Log)-1] + w - now
	}
	*d = Decision{Allowed: true, Remaining: l.Count - n - c, ResetAfter: reset}
}

// countLE is the number of entries of the ascending log that are ≤ t.
func countLE(log []int64, t int64) int {
	i, _ := slices.BinarySearch(log, t+1)
	return i
}

// insertTimes returns the ascending log with c entries at now added. It
// appends in place when now is the newest time (the common case) and copies
// otherwise, so it never changes an element the caller can see.
func insertTimes(log []int64, now, c int64) []int64 {
	i := countLE(log, now)
	if i == len(log) {
		for range c {
			log = append(log, now)
		}
		return log
	}
	out := make([]int64, 0, int64(len(log))+c)
	out = append(out, log[:i]...)
	for range c {
		out = append(out, now)
	}
	return append(out, log[i:]...)
}

// concurrency counts in-flight leases: Count at most, each expiring Period
// ms after it was acquired or last refreshed.
func (l *Limit) concurrency(d *Decision, s *State, now, c int64, id string) {
	live := 0
	held := false
	for _, ls := range s.Leases {
		if ls.Expiry > now {
			live++
			held = held || ls.ID == id && id != ""
		}
	}
	accept := held || int64(live) < l.Count
	if accept && c > 0 {
		// Copy on write: the caller's slice stays as it was.
		next := make([]Lease, 0, live+1)
		for _, ls := range s.Leases {
			if ls.Expiry > now && ls.ID != id {
				next = append(next, ls)
			}
		}
		s.Leases = append(next, Lease{ID: id, Expiry: now + l.Period})
		if !held {
			live++
		}
	}
	*d = Decision{Allowed: accept, Remaining: max(l.Count-int64(live), 0)}
	earliest, latest := int64(0), int64(0)
	for _, ls := range s.Leases {
		if ls.Expiry > now {
			if earliest == 0 || ls.Expiry < earliest {
				earliest = ls.Expiry
			}
			latest = max(latest, ls.Expiry)
		}
	}
	if latest > 0 {
		d.ResetAfter = latest - now
	}
	if !accept {
		d.RetryAfter = max(earliest-now, 1)
	}
}

// Release ends the lease id of a Concurrency state (expired leases go too).
// Like Decide it replaces s.Leases rather than changing its elements. It
// reports whether the lease was held.
func (s *State) Release(id string, now int64) bool {
	i := slices.IndexFunc(s.Leases, func(ls Lease) bool { return ls.ID == id })
	if i < 0 {
		return false
	}
	next := make([]Lease, 0, len(s.Leases)-1)
	for _, ls := range s.Leases {
		if ls.ID != id && ls.Expiry > now {
			next = append(next, ls)
		}
	}
	if len(next) == 0 {
		next = nil
	}
	s.Leases = next
	return true
}
