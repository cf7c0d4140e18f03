// Package memory is rlproxy's default in-process store.Store: limiter state
// for one instance, bounded by MaxKeys with least-recently-used eviction.
//
// Layout: a key string is hashed once to a fixed 128-bit value (two
// hash/maphash seeds), so a tracked key costs the same whatever its length.
// State lives in lock-striped shards; each shard has a slab of fixed-size
// entries (hash, three numbers, expiry, intrusive LRU links: 56 bytes) and
// an open-addressing index of uint32 slab positions. Sliding log and
// concurrency states vary in size and live in a per-shard side map, off
// that fast path. A decision locks the shards of its checks in ascending
// order, so several checks decide atomically without deadlock. Measured:
// about 74 bytes of heap per tracked client at 1M keys (BenchmarkMemoryPerKey).
//
// A key is dropped once its state is idle (algo.Limit.IdleMillis), which
// never changes a decision as long as time does not run backwards; callers
// that pass their own now (replay) must pass ascending times.
package memory

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// Options configures a Store. The zero value is usable.
type Options struct {
	// MaxKeys bounds the tracked keys (default 1,000,000). A new key
	// beyond it evicts the least recently used key of its own shard (LRU
	// per shard, not across shards; shards = MaxKeys/1024 rounded down to
	// a power of two, 1..256, so a store of up to 2047 keys has exact LRU).
	MaxKeys int
	// Clock returns the time in Unix ms. Nil means the wall time read once
	// at New advanced by the monotonic clock (a wall-clock step changes
	// nothing, DESIGN.md "Time").
	Clock func() int64
	// SweepInterval is how often a background goroutine drops state that
	// has become idle (default 1 minute; negative disables it: idle state
	// is then dropped only when it reaches the LRU tail or by Sweep).
	SweepInterval time.Duration
}

// DefaultMaxKeys is MaxKeys when Options.MaxKeys is 0 (docs/CONTRACT.md
// store.max_keys).
const DefaultMaxKeys = 1_000_000

// maxShards caps lock striping; a shard holds at least shardKeys keys
// before the store uses more than one, so small stores keep exact LRU.
const (
	maxShards = 256
	shardKeys = 1024
)

// Store is the in-process store. It is safe for concurrent use; a Store
// must be made with New.
type Store struct {
	clock   func() int64
	seeds   [2]maphash.Seed
	shards  []shard
	shift   uint // shard = key.h0 >> shift
	maxKeys int64
	// keys and evictions are shared by the shards (changed only when a
	// key is added or dropped, never on a hit).
	keys      atomic.Int64
	evictions atomic.Uint64

	stop     chan struct{}
	stopOnce sync.Once
	swept    sync.WaitGroup
}

var _ store.Store = (*Store)(nil)

// New returns a Store; Close stops its sweeper goroutine.
func New(opts Options) *Store {
	maxKeys := opts.MaxKeys
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	n := 1
	for n < maxShards && n*2*shardKeys <= maxKeys {
		n *= 2
	}
	s := &Store{
		clock:   opts.Clock,
		seeds:   [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		shards:  make([]shard, n),
		maxKeys: int64(maxKeys),
		stop:    make(chan struct{}),
	}
	for n > 1 {
		n /= 2
		s.shift++
	}
	s.shift = 64 - s.shift
	if s.clock == nil {
		start := time.Now()
		wall := start.UnixMilli()
		s.clock = func() int64 { return wall + int64(time.Since(start)/time.Millisecond) }
	}
	for i := range s.shards {
		s.shards[i].init(&s.keys)
	}
	every := opts.SweepInterval
	if every == 0 {
		every = time.Minute
	}
	if every > 0 {
		s.swept.Add(1)
		go s.sweepEvery(every)
	}
	return s
}

// Now is the store's clock in Unix ms.
func (s *Store) Now() int64 { return s.clock() }

// hash is a key's fixed-size identity: two independent 64-bit maphashes.
func (s *Store) hash(k string) key {
	return key{maphash.String(s.seeds[0], k), maphash.String(s.seeds[1], k)}
}

// shard is k's lock stripe.
func (s *Store) shard(k key) *shard { return &s.shards[s.shardOf(k)] }

func (s *Store) shardOf(k key) uint32 {
	if s.shift == 64 {
		return 0
	}
	return uint32(k.h0 >> s.shift)
}

// inline is how many checks a decision handles without allocating.
const inline = 4

// Decide implements store.Store: all checks decide at one instant under the
// locks of their shards, and are charged only if all are accepted. Two
// checks with the same key see each other's charge, in order. It fails only
// when len(out) != len(checks).
func (s *Store) Decide(_ context.Context, checks []store.Check, now int64, out []algo.Decision) (int64, error) {
	if len(out) != len(checks) {
		return 0, fmt.Errorf("deciding: %d decisions for %d checks", len(out), len(checks))
	}
	if len(checks) == 1 {
		return s.decideOne(&checks[0], now, &out[0]), nil
	}
	var (
		keyBuf   [inline]key
		shardBuf [inline]uint32
		stateBuf [inline]algo.State
	)
	keys, shards, states := keyBuf[:0], shardBuf[:0], stateBuf[:0]
	if len(checks) > inline {
		keys = make([]key, 0, len(checks))
		shards = make([]uint32, 0, len(checks))
		states = make([]algo.State, 0, len(checks))
	}
	for i := range checks {
		keys = append(keys, s.hash(checks[i].Key))
	}
	shards = s.lock(keys, shards)
	if now == 0 {
		// Read under the locks, so decisions on one shard see ascending times.
		now = s.clock()
	}

	allowed := true
	for i := range checks {
		c := &checks[i]
		sh := s.shard(keys[i])
		_, idx := sh.find(keys[i])
		states = append(states, algo.State{})
		sh.load(idx, c.Limit.Kind, &states[i])
		// A repeated key builds on the earlier check's tentative charge.
		for j := i - 1; j >= 0; j-- {
			if keys[j] == keys[i] && checks[j].Limit.Kind == c.Limit.Kind {
				states[i] = states[j]
				break
			}
		}
		c.Limit.DecideInto(&out[i], &states[i], now, c.Cost, c.Lease)
		allowed = allowed && out[i].Allowed
	}
	for i := range checks {
		c := &checks[i]
		sh := s.shard(keys[i])
		// Found again: a save may have evicted or moved entries.
		slot, idx := sh.find(keys[i])
		switch {
		case allowed && c.Cost > 0:
			s.save(sh, slot, idx, keys[i], &c.Limit, &states[i], now, c.Limit.IdleAfterCharge(&out[i]))
		case !allowed && out[i].Allowed:
			// Not charged: report the peek, on the state as it was.
			var st algo.State
			sh.load(idx, c.Limit.Kind, &st)
			c.Limit.DecideInto(&out[i], &st, now, 0, c.Lease)
			sh.touch(idx)
		default:
			sh.touch(idx)
		}
	}
	for _, i := range shards {
		s.shards[i].expireTail(now)
	}
	s.unlock(shards)
	return now, nil
}

// decideOne is Decide for a single check (the common case): one shard, one
// lookup. It returns the time used.
func (s *Store) decideOne(c *store.Check, now int64, out *algo.Decision) int64 {
	k := s.hash(c.Key)
	sh := s.shard(k)
	sh.mu.Lock()
	if now == 0 {
		now = s.clock()
	}
	slot, idx := sh.find(k)
	var st algo.State
	sh.load(idx, c.Limit.Kind, &st)
	c.Limit.DecideInto(out, &st, now, c.Cost, c.Lease)
	if out.Allowed && c.Cost > 0 {
		s.save(sh, slot, idx, k, &c.Limit, &st, now, c.Limit.IdleAfterCharge(out))
	} else {
		sh.touch(idx)
	}
	sh.expireTail(now)
	sh.mu.Unlock()
	return now
}

// Refund implements store.Store: under the locks of their shards, it
// undoes each check's charge of Cost made at now by an accepted Decide
// (algo.Limit.RefundLease: the inverse the Valkey refund script applies),
// whatever was charged since; Concurrency leases are dropped. A key that
// is gone (idle, evicted) or now holds another kind is left alone, and the
// keys keep their expiry: a refunded state is idle no later than the
// charged one. now 0 means the store's clock. It never fails.
func (s *Store) Refund(_ context.Context, checks []store.Check, now int64) error {
	var keyBuf [inline]key
	var shardBuf [inline]uint32
	keys, shards, now := s.lockChecks(checks, now, keyBuf[:0], shardBuf[:0])
	defer s.unlock(shards)
	for i := range checks {
		c := &checks[i]
		if c.Cost <= 0 {
			continue
		}
		sh := s.shard(keys[i])
		_, idx := sh.find(keys[i])
		if idx == 0 || sh.at(idx).kind() != c.Limit.Kind {
			continue
		}
		e := sh.at(idx)
		if isVar(c.Limit.Kind) {
			// A copy: RefundLease replaces the slices, never their elements.
			st := *sh.vars[e.k]
			c.Limit.RefundLease(&st, now, c.Cost, c.Lease)
			*sh.vars[e.k] = st
			continue
		}
		st := algo.State{A: e.a, B: e.b, C: e.c}
		c.Limit.RefundLease(&st, now, c.Cost, c.Lease)
		e.a, e.b, e.c = st.A, st.B, st.C
	}
	return nil
}

// Release implements store.Store: it ends the Concurrency leases among
// checks; other kinds and unknown leases are ignored. It never fails.
func (s *Store) Release(_ context.Context, checks []store.Check) error {
	for i := range checks {
		c := &checks[i]
		if c.Limit.Kind != algo.Concurrency || c.Lease == "" {
			continue
		}
		k := s.hash(c.Key)
		sh := &s.shards[s.shardOf(k)]
		sh.mu.Lock()
		now := s.clock()
		if _, idx := sh.find(k); idx != 0 && sh.at(idx).kind() == algo.Concurrency {
			st := sh.vars[k]
			if st.Release(c.Lease, now) {
				sh.setIdle(idx, &c.Limit, st, now)
			}
		}
		sh.mu.Unlock()
	}
	return nil
}

// Close stops the sweeper goroutine. State stays readable; Close is
// idempotent and returns nil.
func (s *Store) Close() error {
	s.stopOnce.Do(func() { close(s.stop) })
	s.swept.Wait()
	return nil
}

// Len is the number of tracked keys (for metrics).
func (s *Store) Len() int { return int(s.keys.Load()) }

// Evictions is the number of keys dropped to stay within MaxKeys while
// their state was not idle yet (for metrics).
func (s *Store) Evictions() uint64 { return s.evictions.Load() }

// Sweep drops every key whose state is idle at now (Unix ms) and returns
// how many it dropped. An idle state decides exactly as missing state, so
// sweeping never changes a decision at now or later.
func (s *Store) Sweep(now int64) int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.sweep(now)
		sh.mu.Unlock()
	}
	return n
}

// sweepEvery runs Sweep every interval until Close.
func (s *Store) sweepEvery(every time.Duration) {
	defer s.swept.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Sweep(s.clock())
		}
	}
}

// lock locks the distinct shards of keys in ascending order (the order every
// decision uses, so two decisions never wait on each other in a cycle) and
// returns them, appended to buf.
func (s *Store) lock(keys []key, buf []uint32) []uint32 {
	for _, k := range keys {
		sh := s.shardOf(k)
		i := len(buf)
		for i > 0 && buf[i-1] > sh {
			i--
		}
		if i > 0 && buf[i-1] == sh {
			continue
		}
		buf = append(buf, 0)
		copy(buf[i+1:], buf[i:])
		buf[i] = sh
	}
	for _, sh := range buf {
		s.shards[sh].mu.Lock()
	}
	return buf
}

func (s *Store) unlock(shards []uint32) {
	for _, sh := range shards {
		s.shards[sh].mu.Unlock()
	}
}

// load sets the idle *st to the state at slab position idx for kind (left
// idle when idx is 0 or the state was kept for another kind). Variable
// states come as a shallow copy, which algo.Decide never changes in place.
func (sh *shard) load(idx uint32, kind algo.Kind, st *algo.State) {
	if idx == 0 {
		return
	}
	e := sh.at(idx)
	switch {
	case e.kind() != kind:
	case isVar(kind):
		*st = *sh.vars[e.k]
	default:
		st.A, st.B, st.C = e.a, e.b, e.c
	}
}

// save stores k's charged state with its idle time, idle ms after now (its
// algo.Limit.IdleMillis, which the charge's decision already gives:
// algo.Limit.IdleAfterCharge); slot and idx are what sh.find(k) returned.
// The shard must be locked.
func (s *Store) save(sh *shard, slot, idx uint32, k key, l *algo.Limit, st *algo.State, now, idle int64) {
	if idx == 0 {
		// An empty shard cannot make room: the bound then gives way, by
		// at most one key per other shard.
		if s.keys.Load() >= s.maxKeys && sh.n > 0 {
			tail := sh.at(0).prev
			if sh.at(tail).expiry() > now {
				s.evictions.Add(1)
			}
			sh.remove(tail)
			slot, _ = sh.find(k)
		}
		idx = sh.insert(slot, k)
	}
	e := sh.at(idx)
	if isVar(e.kind()) && e.kind() != l.Kind {
		delete(sh.vars, k)
	}
	if isVar(l.Kind) {
		v := sh.vars[k]
		if v == nil {
			v = new(algo.State)
			sh.vars[k] = v
		}
		*v = *st
	} else {
		e.a, e.b, e.c = st.A, st.B, st.C
	}
	e.setMeta(l.Kind, now+idle)
	sh.toFront(idx)
}

// isVar reports whether kind keeps variable-size state (the side map):
// its algo.Algorithm says.
func isVar(kind algo.Kind) bool {
	a := algo.Describe(kind)
	return a != nil && a.Var
}
