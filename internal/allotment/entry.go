package allotment

import (
	"sync"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// entry is one hot key's allotment state on this instance.
type entry struct {
	mu    sync.Mutex
	key   string
	limit algo.Limit       // the limit its slices were taken under (their version)
	set   *store.Allotment // the policy's allotment option
	stats *Stats
	gen   uint64 // bumped when limit or set change: a fetch under an older one is returned
	// cur is spent first; next is the slice fetched to follow it (of
	// the same window); ahead is a window's slice of the next window,
	// fetched before the current one ends (prefetch).
	cur, next, ahead slice
	// fetching and fetchingAhead mark a fetch on its way, of the
	// current window (or bucket) and of the next window: one of each at
	// a time, so a prefetch never holds up a refill.
	fetching, fetchingAhead bool
	// lean is the local ms before which no slice is fetched: the store
	// had too little left of a bucket, or failed. dry is the store ms
	// end of a window that had too little left: no more slices of it.
	lean, dry int64
	// rtt is the last fetch's round trip, ms.
	rtt int64
	// lo and hi bound the store's clock minus the local one (ms), from
	// the last fetch on the store's clock (the store read its clock
	// between the fetch's send and its reply); both 0 when time is
	// injected (the store decides at the time passed). mapped is false
	// until a fetch set them.
	lo, hi int64
	mapped bool
	// last is the local ms of the key's latest request; start, n and
	// prev its requests (units) in the heat period (the ttl) from start
	// and in the one before: the key's rate on this instance.
	last, start, n, prev int64
}

// slice is units of a key's allowance held by this instance.
type slice struct {
	// units is the units not yet spent; size those granted.
	units, size int64
	// at is the store's now of the fetch: a return refunds at it; got
	// the local ms it arrived.
	at, got int64
	// until is the local ms from which the slice is not spent: the ttl
	// from the fetch's send.
	until int64
	// win and end are a window's slice's window (store ms; the window
	// it was charged to): it pays only decisions whose time on the
	// store's clock surely lies in it. win is 0 once the window surely
	// began (a fetch in it, or a decision after); both 0 for a bucket's.
	win, end int64
	// left is the units the store had left after the grant; reset the
	// local ms at which the limit was to be idle (header values).
	left, reset int64
}

// heat is a hashed counter of requests of the keys without an entry
// that hash to it, in the heat period from start.
type heat struct {
	h        uint64
	start, n int64
}

// warm counts cost for the key of hash h at t in its heat slot and
// reports whether the key is hot: at least hot units within period ms.
// Keys that share a slot take it over from each other, so a collision
// only delays a key becoming hot.
func (sh *shard) warm(h uint64, cost, t, period, hot int64) bool {
	sh.hmu.Lock()
	defer sh.hmu.Unlock()
	c := &sh.heat[(h>>8)%heatSlots]
	if c.h != h || t-c.start >= period {
		*c = heat{h: h, start: t}
	}
	c.n += cost
	return c.n >= hot
}

// observe counts cost at t in e's rate. e.mu is held.
func (e *entry) observe(t, cost int64) {
	p := e.set.TTL
	switch el := t - e.start; {
	case el >= 2*p:
		e.start, e.n, e.prev = t, 0, 0
	case el >= p:
		e.start, e.n, e.prev = e.start+p, 0, e.n
	}
	e.n += cost
	e.last = t
}

// over reports whether s can no longer pay at t: its ttl ended, or its
// window surely did. e.mu is held.
func (e *entry) over(s *slice, t int64) bool {
	return t >= s.until || (s.end != 0 && t+e.lo >= s.end)
}

// covers reports whether s can pay a decision at t: not over, and for a
// window's slice, t on the store's clock surely in its window. e.mu is
// held.
func (e *entry) covers(s *slice, t int64) bool {
	return !e.over(s, t) && (s.end == 0 || (s.win <= t+e.lo && t+e.hi < s.end))
}

// spend pays cost from e's slices at t and writes the decision to d; it
// reports false when they cannot pay (the store decides). Slices that
// ended are given back. A decision that may lie on either side of a
// window's edge (t on the store's clock is known within hi-lo) is paid
// in both windows, from cur and ahead: whichever it counts in was charged
// for it. e.mu is held.
func (l *Layer) spend(e *entry, t, cost int64, d *algo.Decision) bool {
	if e.cur.units > 0 && (e.over(&e.cur, t) || (e.cur.units < cost && e.next.units >= cost)) {
		l.giveBack(e, &e.cur)
	}
	if e.next.units > 0 && e.over(&e.next, t) {
		l.giveBack(e, &e.next)
	}
	if e.ahead.units > 0 && e.over(&e.ahead, t) {
		l.giveBack(e, &e.ahead)
	}
	if e.cur.units == 0 && e.next.units > 0 {
		e.cur, e.next = e.next, slice{}
	}
	if e.cur.units == 0 && e.ahead.units > 0 && t+e.lo >= e.ahead.win {
		e.cur, e.ahead = e.ahead, slice{}
		e.cur.win = 0 // surely begun: local time only moves on
		e.cur.got = t // its spending (and so its rate) starts now
	}
	s, a := &e.cur, &e.ahead
	switch {
	case s.units >= cost && e.covers(s, t):
		s.units -= cost
		e.stats.Outstanding.Add(-cost)
	case s.units >= cost && a.units >= cost && s.end != 0 && a.win == s.end && s.win <= t+e.lo &&
		t+e.hi < a.end && !e.over(s, t) && t < a.until: // straddling the edge
		s.units, a.units = s.units-cost, a.units-cost
		e.stats.Outstanding.Add(-2 * cost)
	default:
		return false
	}
	rem := s.left + s.units
	if e.next.end == s.end {
		rem += e.next.units
	}
	*d = algo.Decision{Allowed: true, Remaining: rem, ResetAfter: max(s.reset-t, 0)}
	return true
}

// held is the units of e's slices that can still pay at t: those of the
// current window (or bucket), not a prefetched next window's. e.mu is
// held.
func (e *entry) held(t int64) int64 {
	var n int64
	for _, s := range [...]*slice{&e.cur, &e.next} {
		if s.units > 0 && !e.over(s, t) {
			n += s.units
		}
	}
	return n
}

// wanted is the size of the slice to fetch for e at t, 0 for none, and
// for a window's slice of the next window (a prefetch) that window's
// start, store ms. A fixed window's next one is fetched in its last
// aheadLead ms plus four round trips, beside any fetch of the current
// window: one that takes up to four times as long as the last still
// arrives before the edge. It is at least the current slice's size, and
// fetched again (added to it) once half spent: decisions near the edge
// pay from it too. Otherwise a slice is fetched when the current one is half spent, or has left less than
// two round trips of its rate, or is gone, and no other is held or on
// its way, but not in a window's last two round trips (it would end at
// once). It marks e fetching (or fetchingAhead). e.mu is held.
func (e *entry) wanted(t, hot int64) (want, ahead int64) {
	if t < e.lean || e.n+e.prev < hot {
		return 0, 0
	}
	rule := algo.Describe(e.limit.Kind).Slices
	if rule.Windowed() && e.mapped {
		end := e.limit.WindowEnd(t + e.lo)
		left := end - (t + e.hi) // ms surely left in the window
		if rule == algo.SliceWindow && left <= 4*e.rtt+aheadLead && !e.fetchingAhead && e.ahead.units <= e.ahead.size/2 && e.dry != e.limit.WindowEnd(end) {
			e.fetchingAhead = true
			return max(e.size(t), e.cur.size), end
		}
		if e.dry == end || left <= 2*e.rtt+1 {
			return 0, 0
		}
	}
	if e.fetching || e.next.units > 0 {
		return 0, 0
	}
	r := e.rate(t)
	if !e.over(&e.cur, t) && e.cur.units > max(e.cur.size/2, int64(r*float64(2*e.rtt+1))) {
		return 0, 0
	}
	e.fetching = true
	return e.size(t), 0
}

// size is the units of a slice fetched at t: enough for half a ttl of
// the key's rate — the larger of its rate over the heat periods and the
// rate the current slice is being spent at, so a key that speeds up once
// its requests no longer wait on the store gets large slices at once —
// and at least minSlice. e.mu is held.
func (e *entry) size(t int64) int64 {
	r := e.rate(t)
	ttl := e.set.TTL
	want := max(ceilDiv((e.n+e.prev)*(ttl/2+1), t-e.start+ttl), int64(min(r*float64(ttl/2), maxWant)))
	if e.cur.size > 0 && t-e.cur.got < ttl/4 { // spent fast: at least double
		want = max(want, min(2*e.cur.size, maxWant))
	}
	return max(want, minSlice)
}

// rate is the units per ms the current slice has been spent at by t.
// e.mu is held.
func (e *entry) rate(t int64) float64 {
	if s := &e.cur; s.size > s.units {
		return float64(s.size-s.units) / float64(max(t-s.got, 1))
	}
	return 0
}

// ceilDiv is ceil(a/b) for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
