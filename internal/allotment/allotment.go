// Package allotment decides hot keys of a shared store locally: an
// instance takes a slice of a key's allowance from the store in one
// atomic script run (charged there at once, so the store sees every
// unit), spends it at memory speed, fetches the next slice before the
// current one runs out, and returns the unused units when the slice ends.
//
// Only keys this instance sees often get slices (a hashed counter per
// key, no per-key state for quiet ones); every other decision goes to the
// store exactly as without allotments. A slice never refuses: a request
// its slice cannot pay for is decided by the store. The bounds each
// algorithm keeps are in docs/reference/algorithms.md "Allotments".
package allotment

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// Source is the shared store's allotment side (valkey.Store).
type Source interface {
	// Allot takes and charges a slice of ck's allowance at now (0: the
	// store's clock): at most ck.Cost units and permille/1000 of those
	// left. It returns the store time used, the units granted, the units
	// left after them and the ms until the limit is idle.
	Allot(ctx context.Context, ck store.Check, permille, now int64) (used, granted, left, reset int64, err error)
	// Refund gives back units charged at now (store.Store.Refund).
	Refund(ctx context.Context, checks []store.Check, now int64) error
}

// Defaults of Options.
const (
	// DefaultHot is requests of one key within one heat period (the
	// policy's ttl) that make it hot.
	DefaultHot = 8
	// DefaultMaxKeys bounds the keys holding slices per instance.
	DefaultMaxKeys = 10_000
	// minSlice is the smallest slice asked for: a fetch then serves at
	// least this many requests, so fetches stay below 1/minSlice of them.
	minSlice = 16
	// maxWant bounds the units one fetch asks for (below 2^53: the
	// script's doubles).
	maxWant = 1e15
	// shards is the number of independently locked parts of the layer.
	shards = 16
	// heatSlots is the number of hashed heat counters per shard.
	heatSlots = 1024
	// aheadLead is how long (ms) before a window's end, beyond four
	// round trips, its next window's slice is fetched (entry.wanted).
	aheadLead = 20
)

// Options configures New.
type Options struct {
	// Now is the local clock (Unix ms); nil is the wall clock.
	Now func() int64
	// Go runs a fetch or a return in the background; nil starts a
	// goroutine. Tests pass a function that runs it at once.
	Go func(func())
	// Hot is requests of one key within a heat period that make it hot;
	// <= 0 means DefaultHot.
	Hot int64
	// MaxKeys bounds the keys holding slices; past it, new hot keys are
	// decided in the store. <= 0 means DefaultMaxKeys.
	MaxKeys int
	// Timeout bounds each fetch and return; 0 means 5 s.
	Timeout time.Duration
	// SweepEvery is how often a goroutine returns the slices that ended
	// (Sweep) until Close; 0 starts none.
	SweepEvery time.Duration
	// Returned, when non-nil, is told each key whose unused units a
	// return gave back to the store, once the refund was answered: a
	// refusal remembered above this layer (the over-limit cache) may be
	// stale, since the store has units for the key again.
	Returned func(key string)
}

// Layer is a store.Store that decides the checks carrying an Allotment
// from slices when their key is hot, and passes everything else to next.
// It is safe for concurrent use.
type Layer struct {
	next    store.Store
	src     Source
	now     func() int64
	spawn   func(func())
	hot     int64
	maxKeys int
	tmo     time.Duration
	seed    maphash.Seed
	shards  [shards]shard
	// returned is Options.Returned (nil: none).
	returned func(key string)

	mu       sync.Mutex
	policies atomic.Pointer[map[string]*Stats]
	keys     atomic.Int64
	closed   atomic.Bool
	stop     chan struct{} // closed by Close: the sweeper ends
}

// shard is one part of the layer: the keys holding slices and the heat
// counters of the keys hashed to it.
type shard struct {
	mu   sync.RWMutex
	m    map[string]*entry
	hmu  sync.Mutex // guards heat
	heat [heatSlots]heat
}

// Stats is one policy's allotment figures, the metrics
// rlproxy_allotment_outstanding_units and rlproxy_allotment_fetches_total.
type Stats struct {
	// Outstanding is units charged in the store for slices and not yet
	// spent locally or given back.
	Outstanding atomic.Int64
	// Fetches is slices asked for (granted or not).
	Fetches atomic.Uint64
}

var _ store.Store = (*Layer)(nil)

// New returns a layer in front of next that takes slices from src (the
// store next decides in, or next itself).
func New(next store.Store, src Source, opt Options) *Layer {
	l := &Layer{next: next, src: src, now: opt.Now, spawn: opt.Go, hot: opt.Hot, maxKeys: opt.MaxKeys, tmo: opt.Timeout, seed: maphash.MakeSeed(),
		returned: opt.Returned}
	if l.now == nil {
		l.now = func() int64 { return time.Now().UnixMilli() }
	}
	if l.spawn == nil {
		l.spawn = func(f func()) { go f() }
	}
	if l.hot <= 0 {
		l.hot = DefaultHot
	}
	if l.maxKeys <= 0 {
		l.maxKeys = DefaultMaxKeys
	}
	if l.tmo <= 0 {
		l.tmo = 5 * time.Second
	}
	for i := range l.shards {
		l.shards[i].m = make(map[string]*entry)
	}
	m := map[string]*Stats{}
	l.policies.Store(&m)
	l.stop = make(chan struct{})
	if opt.SweepEvery > 0 {
		go l.sweep(opt.SweepEvery)
	}
	return l
}

// Decide implements store.Store. A decision of one check that carries an
// Allotment and a cost is taken from the key's slice when the key is hot
// and its slice can pay; every other decision is next's.
func (l *Layer) Decide(ctx context.Context, checks []store.Check, now int64, out []algo.Decision) (int64, error) {
	if len(checks) != 1 || checks[0].Allot == nil || checks[0].Cost < 1 || l.closed.Load() {
		at, err := l.next.Decide(ctx, checks, now, out)
		if err == nil {
			l.addHeld(checks, now, out)
		}
		return at, err
	}
	ck := &checks[0]
	t := now
	if t == 0 {
		t = l.now()
	}
	h := maphash.String(l.seed, ck.Key)
	sh := &l.shards[h%shards]
	sh.mu.RLock()
	e := sh.m[ck.Key]
	sh.mu.RUnlock()
	if e == nil {
		if !sh.warm(h, ck.Cost, t, ck.Allot.TTL, l.hot) {
			return l.next.Decide(ctx, checks, now, out)
		}
		if e = l.add(sh, ck, t); e == nil {
			return l.next.Decide(ctx, checks, now, out)
		}
	}
	e.mu.Lock()
	if e.limit != ck.Limit || *e.set != *ck.Allot {
		l.retire(e, ck)
	}
	e.observe(t, ck.Cost)
	ok := l.spend(e, t, ck.Cost, &out[0])
	want, ahead := e.wanted(t, l.hot)
	e.mu.Unlock()
	if want > 0 {
		at := now // the store's clock unless time is injected
		l.spawn(func() { l.fetch(e, want, at, ahead) })
	}
	if ok {
		return t, nil
	}
	return l.next.Decide(ctx, checks, now, out)
}

// addHeld adds to the remaining of each cost-0 check with an Allotment
// (a look that charges nothing: the quota endpoint, the admin quota
// lookup) the units this instance holds for its key in slices it can
// still spend at now (0: the local clock): the store counts them as
// charged, yet they are the client's to spend. Units held by other
// instances are not known here: the figure is short by at most those
// (the under-admission bound).
func (l *Layer) addHeld(checks []store.Check, now int64, out []algo.Decision) {
	for i := range checks {
		ck := &checks[i]
		if ck.Cost != 0 || ck.Allot == nil {
			continue
		}
		if now == 0 {
			now = l.now()
		}
		sh := &l.shards[maphash.String(l.seed, ck.Key)%shards]
		sh.mu.RLock()
		e := sh.m[ck.Key]
		sh.mu.RUnlock()
		if e == nil {
			continue
		}
		e.mu.Lock()
		if e.limit == ck.Limit && *e.set == *ck.Allot {
			out[i].Remaining += e.held(now)
		}
		e.mu.Unlock()
	}
}

// add creates the entry of a key that became hot; nil past MaxKeys.
func (l *Layer) add(sh *shard, ck *store.Check, t int64) *entry {
	if l.keys.Load() >= int64(l.maxKeys) {
		return nil
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[ck.Key]; e != nil {
		return e
	}
	e := &entry{key: ck.Key, limit: ck.Limit, set: ck.Allot, stats: l.stats(ck.Allot.Policy), start: t, n: l.hot - ck.Cost}
	sh.m[ck.Key] = e
	l.keys.Add(1)
	return e
}

// stats returns policy's Stats, created on first use.
func (l *Layer) stats(policy string) *Stats {
	if s := (*l.policies.Load())[policy]; s != nil {
		return s
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := *l.policies.Load()
	if s := old[policy]; s != nil {
		return s
	}
	m := make(map[string]*Stats, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	s := &Stats{}
	m[policy] = s
	l.policies.Store(&m)
	return s
}

// EachAllotment implements metrics.AllotmentStats: f gets every policy
// that took a slice, its units held and its fetches.
func (l *Layer) EachAllotment(f func(policy string, outstanding int64, fetches uint64)) {
	for p, s := range *l.policies.Load() {
		f(p, s.Outstanding.Load(), s.Fetches.Load())
	}
}

// retire ends e's slices because ck's limit or allotment changed (a
// reload): their units go back and none is spent against the new limit.
// e.mu is held.
func (l *Layer) retire(e *entry, ck *store.Check) {
	l.giveBack(e, &e.cur)
	l.giveBack(e, &e.next)
	l.giveBack(e, &e.ahead)
	e.limit, e.set, e.gen, e.dry = ck.Limit, ck.Allot, e.gen+1, 0
}

// giveBack empties s and returns its unused units to the store in the
// background. e.mu is held.
func (l *Layer) giveBack(e *entry, s *slice) {
	if f := l.takeBack(e, s); f != nil {
		l.spawn(f)
	}
}

// takeBack empties s and returns the function that refunds its unused
// units to the store, nil when there are none. A refund that fails leaves
// them charged: the under-admission bound counts them. e.mu is held.
func (l *Layer) takeBack(e *entry, s *slice) func() {
	n, at := s.units, s.at
	*s = slice{}
	if n <= 0 {
		return nil
	}
	ret := []store.Check{{Key: e.key, Limit: e.limit, Cost: n}}
	st := e.stats
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), l.tmo)
		defer cancel()
		err := l.src.Refund(ctx, ret, at)
		st.Outstanding.Add(-n) // charged until here
		if err == nil && l.returned != nil {
			l.returned(ret[0].Key)
		}
	}
}

// fetch takes a slice of want units for e and installs it. at is the
// now of the decision that asked (0: the store's clock); ahead, when not
// 0, is the start (store ms) of the next window, whose slice is taken
// before it begins: charged to that window at once, spent from its start.
func (l *Layer) fetch(e *entry, want, at, ahead int64) {
	e.mu.Lock()
	ck := store.Check{Key: e.key, Limit: e.limit, Cost: want}
	permille, ttl, gen := e.set.MaxFraction, e.set.TTL, e.gen
	e.stats.Fetches.Add(1)
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), l.tmo)
	defer cancel()
	sent := l.now()
	switch {
	case ahead != 0:
		at = ahead // the window's first ms: the store charges that window
	case at != 0:
		at = max(at, sent)
	}
	used, granted, left, reset, err := l.src.Allot(ctx, ck, permille, at)
	recv := l.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if ahead != 0 {
		e.fetchingAhead = false
	} else {
		e.fetching = false
	}
	if err != nil {
		e.lean = recv + ttl // the store is failing: decide per request (the fail mode) for a while
		return
	}
	e.rtt = recv - sent
	s := slice{units: granted, size: granted, at: used, got: recv, until: sent + ttl, left: left, reset: recv + reset}
	window := algo.Describe(ck.Limit.Kind).Slices.Windowed()
	if window {
		if ahead == 0 {
			e.mapClocks(at, used, sent, recv)
		}
		s.end = used + reset
		if ahead != 0 {
			s.win = used
		}
		s.reset = s.end - e.lo
	}
	if granted < minSlice { // little left: per request until it refills or the window ends
		e.lean = s.until
		if window {
			e.lean, e.dry = 0, s.end
		}
	}
	if granted == 0 {
		return
	}
	e.stats.Outstanding.Add(granted)
	switch {
	case gen != e.gen || l.closed.Load() || e.over(&s, recv):
		l.giveBack(e, &s)
	case ahead != 0 && e.ahead.units == 0:
		e.ahead = s
	case ahead != 0 && e.ahead.win == s.win: // a top-up of the same window
		e.ahead.units, e.ahead.size, e.ahead.until = e.ahead.units+s.units, e.ahead.size+s.size, min(e.ahead.until, s.until)
	case ahead != 0:
		l.giveBack(e, &s)
	case e.cur.units == 0:
		e.cur = s
	default:
		e.next = s
	}
}

// mapClocks sets e's bounds on the store's clock minus the local one from
// a fetch sent at sent and answered at recv (local ms) that the store
// decided at used: with injected time (at != 0) the store used the time
// passed, so the clocks are one. e.mu is held.
func (e *entry) mapClocks(at, used, sent, recv int64) {
	e.mapped = true
	if at != 0 {
		e.lo, e.hi = 0, 0
		return
	}
	e.lo, e.hi = used-recv, used-sent
}

// Sweep returns the unused units of every slice that ended by now (local
// Unix ms) and forgets keys without slices that are no longer hot. The
// server calls it periodically (Run); tests call it with their clock.
func (l *Layer) Sweep(now int64) {
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			e.mu.Lock()
			if e.cur.units > 0 && e.over(&e.cur, now) {
				l.giveBack(e, &e.cur)
			}
			if e.next.units > 0 && e.over(&e.next, now) {
				l.giveBack(e, &e.next)
			}
			if e.ahead.units > 0 && e.over(&e.ahead, now) {
				l.giveBack(e, &e.ahead)
			}
			if e.cur.units == 0 && e.next.units == 0 && e.ahead.units == 0 && !e.fetching && !e.fetchingAhead && now-e.last > e.set.TTL {
				delete(sh.m, k)
				l.keys.Add(-1)
			}
			e.mu.Unlock()
		}
		sh.mu.Unlock()
	}
}

// sweep calls Sweep every interval until Close.
func (l *Layer) sweep(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.Sweep(l.now())
		}
	}
}

// Release implements store.Store (next's).
func (l *Layer) Release(ctx context.Context, checks []store.Check) error {
	return l.next.Release(ctx, checks)
}

// Refund implements store.Store: next's. A refund of a decision taken
// from a slice goes to the store too: the slice's units were charged
// there, so the refund undoes the same charge.
func (l *Layer) Refund(ctx context.Context, checks []store.Check, now int64) error {
	return l.next.Refund(ctx, checks, now)
}

// Charge implements store.Store (next's).
func (l *Layer) Charge(ctx context.Context, checks []store.Check, now int64) error {
	return l.next.Charge(ctx, checks, now)
}

// Close returns every unused unit (waiting for the returns, each bounded
// by Options.Timeout) and closes next.
func (l *Layer) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	close(l.stop)
	var wg sync.WaitGroup
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for _, e := range sh.m {
			e.mu.Lock()
			for _, s := range []*slice{&e.cur, &e.next, &e.ahead} {
				if f := l.takeBack(e, s); f != nil {
					wg.Add(1)
					go func() {
						defer wg.Done()
						f()
					}()
				}
			}
			e.mu.Unlock()
		}
		sh.mu.Unlock()
	}
	wg.Wait()
	return l.next.Close()
}
