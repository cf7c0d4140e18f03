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
	// cur is spent first; next is the prefetched slice that follows it.
	cur, next slice
	fetching  bool
	// lean is the local ms before which no slice is fetched: the store
	// had too little left, or failed.
	lean int64
	// rtt is the last fetch's round trip, ms.
	rtt int64
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
	// from the fetch's send, for windows also the window's end minus
	// the round trip.
	until int64
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

// spend pays cost from e's slices at t and writes the decision to d; it
// reports false when they cannot pay (the store decides). Slices that
// ended are given back. e.mu is held.
func (l *Layer) spend(e *entry, t, cost int64, d *algo.Decision) bool {
	if e.cur.units > 0 && (t >= e.cur.until || (e.cur.units < cost && e.next.units >= cost)) {
		l.giveBack(e, &e.cur)
	}
	if e.cur.units == 0 && e.next.units > 0 {
		e.cur, e.next = e.next, slice{}
		if t >= e.cur.until {
			l.giveBack(e, &e.cur)
		}
	}
	s := &e.cur
	if s.units < cost {
		return false
	}
	s.units -= cost
	e.stats.Outstanding.Add(-cost)
	*d = algo.Decision{Allowed: true, Remaining: s.left + s.units + e.next.units, ResetAfter: max(s.reset-t, 0)}
	return true
}

// wanted is the size of the slice to fetch for e at t, 0 for none: a
// slice is fetched when the current one is half spent, or has left less
// than two round trips of its rate, or is gone, and no other is held or
// on its way, sized to serve half a ttl of the key's
// rate — the larger of its rate over the heat periods and the rate the
// current slice is being spent at, so a key that speeds up once its
// requests no longer wait on the store gets large slices at once — and
// at least minSlice. A window's slice is not fetched in its last
// two round trips (it would be clipped at once): the next window's
// first requests fetch. It marks e fetching. e.mu is held.
func (e *entry) wanted(t, hot int64) int64 {
	if e.fetching || t < e.lean || e.next.units > 0 || e.n+e.prev < hot {
		return 0
	}
	var r float64 // units per ms the current slice is spent at
	if s := &e.cur; s.size > s.units {
		r = float64(s.size-s.units) / float64(max(t-s.got, 1))
	}
	if t < e.cur.until && e.cur.units > max(e.cur.size/2, int64(r*float64(2*e.rtt+1))) {
		return 0
	}
	ttl := e.set.TTL
	if algo.Describe(e.limit.Kind).Slices == algo.SliceWindow && e.limit.WindowEnd(t)-t <= 2*e.rtt+1 {
		return 0
	}
	want := max(ceilDiv((e.n+e.prev)*(ttl/2+1), t-e.start+ttl), int64(min(r*float64(ttl/2), maxWant)))
	if e.cur.size > 0 && t-e.cur.got < ttl/4 { // spent fast: at least double
		want = max(want, min(2*e.cur.size, maxWant))
	}
	e.fetching = true
	return max(want, minSlice)
}

// ceilDiv is ceil(a/b) for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
