package guard

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// DefaultMaxEntries is OverLimitCache's bound when OverLimitOptions.MaxEntries
// is <= 0: about 2 MB (some 170 bytes per entry) plus the keys.
const DefaultMaxEntries = 10000

// maxShards is the number of independently locked parts of the cache.
const maxShards = 16

// OverLimitOptions configures NewOverLimitCache. The zero value uses the
// defaults.
type OverLimitOptions struct {
	// MaxEntries bounds the keys remembered; at the bound the oldest written
	// entry of the key's shard is evicted. <= 0 means DefaultMaxEntries.
	MaxEntries int
	// Now is the local clock in Unix ms, read before a decision is sent
	// (when the caller passes now = 0); nil means wall time read once and
	// advanced by the monotonic clock, like the memory store.
	Now func() int64
	// OnLocalRefusal, when non-nil, is called for each decision refused
	// locally (the rlproxy_local_refusals_total metric).
	OnLocalRefusal func()
}

// OverLimitCache answers repeat refusals locally, like envoyproxy/ratelimit's
// local over-limit cache: when the store refuses a check (any kind but
// algo.Concurrency, whose leases may be released early) with RetryAfter r,
// the cache remembers "key K, cost c, refused until s + r", s being the local
// time taken before the request was sent. A later Decide at local time t with
// s <= t < s + r whose checks include K with the same Limit and a cost >= c
// is refused without calling the store, and counted (LocalRefusals).
//
// Why the refusal itself is exact: for windows, buckets and the sliding log,
// a key's state moves towards acceptance only as time passes, at a rate set
// by its Limit, and every accepted request moves it away; a larger cost is
// refused longer. So a refusal of cost c for r ms holds for r ms for any cost
// >= c, whatever traffic other instances add. Only a limit change ends it
// early: entries are bound to the Limit they were refused under (a changed
// Limit is a miss), and Flush drops everything on reload. With the store's
// own clock (now = 0) s is taken before sending, so the local refusal ends no
// later than the store's, up to clock-rate drift.
//
// What a local answer approximates (header values only, never whether the
// request is refused):
//   - the refusing check: RetryAfter = s + r - t, exact when its cost equals
//     c and no other traffic charged the key since (more traffic or a larger
//     cost means the store would say longer); Remaining = the store's value at
//     s (exact for cost 1: always 0); ResetAfter = the store's ResetAfter at s
//     minus (t - s), exact likewise, or RetryAfter once that has passed (a
//     sliding window counter refused into its next window);
//   - the other checks are reported as not refusing (Allowed, RetryAfter 0,
//     Wait 0) with the Remaining the store last reported for them in a
//     refused decision and that decision's ResetAfter minus the time since
//     (at least 0). If traffic elsewhere made one of them refuse as well, it
//     is still reported as not refusing (so Retry-After may omit its wait).
//     A check never seen in a refused decision (or seen under another Limit)
//     is unknown: the decision then goes to the store, which also records it.
//
// Peeks (every cost 0) always reach the store: no cached cost is below 1.
//
// Entries are written only after refused store decisions, never on the
// accept path; the hit path takes one read lock per check and allocates
// nothing. Memory is bounded by MaxEntries.
type OverLimitCache struct {
	next   store.Store
	now    func() int64
	seed   maphash.Seed
	shards []olShard

	// size is the number of entries in all shards; 0 skips the lookups.
	size atomic.Int64
	// local counts decisions answered locally.
	local   atomic.Uint64
	onLocal func()
}

// olShard is one independently locked part of the cache; entries form a list
// in write order (oldest first) for eviction.
type olShard struct {
	mu         sync.RWMutex
	m          map[string]*olEntry
	head, tail *olEntry
	max        int
}

// olEntry is what the store last said about one key in a refused decision.
// Times are local Unix ms.
type olEntry struct {
	key   string
	limit algo.Limit
	// sent is the local time the decision was requested.
	sent int64
	// until is sent + RetryAfter when the key refused (cost >= cost refuses
	// while sent <= t < until); 0 when it did not refuse.
	until     int64
	cost      int64
	remaining int64
	// resetAt is sent + ResetAfter.
	resetAt int64

	prev, next *olEntry
}

// NewOverLimitCache returns an empty cache in front of next.
func NewOverLimitCache(next store.Store, opts OverLimitOptions) *OverLimitCache {
	maxEntries := opts.MaxEntries
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	now := opts.Now
	if now == nil {
		start := time.Now()
		now = func() int64 { return start.UnixMilli() + time.Since(start).Milliseconds() }
	}
	n := min(maxShards, maxEntries)
	c := &OverLimitCache{next: next, now: now, seed: maphash.MakeSeed(), shards: make([]olShard, n), onLocal: opts.OnLocalRefusal}
	for i := range c.shards {
		// Spread the remainder so the shard bounds add up to maxEntries.
		c.shards[i] = olShard{m: make(map[string]*olEntry), max: maxEntries / n}
		if i < maxEntries%n {
			c.shards[i].max++
		}
	}
	return c
}

// LocalRefusals returns the number of decisions refused locally since the
// cache was made (store calls saved).
func (c *OverLimitCache) LocalRefusals() uint64 { return c.local.Load() }

// Len returns the number of keys remembered.
func (c *OverLimitCache) Len() int { return int(c.size.Load()) }

// Flush forgets everything; call it when limits may have changed (config
// reload). A decision in flight during Flush may still record its refusal,
// under its own Limit, so it cannot refuse checks of a changed Limit.
func (c *OverLimitCache) Flush() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		c.size.Add(-int64(len(s.m)))
		clear(s.m)
		s.head, s.tail = nil, nil
		s.mu.Unlock()
	}
}

// Decide answers locally when a check is known to be refused (see
// OverLimitCache), returning the local time used; otherwise it forwards to
// the wrapped store and records refusals. Store errors are returned
// unchanged. A non-zero now (replay) is the local time too.
func (c *OverLimitCache) Decide(ctx context.Context, checks []store.Check, now int64, out []algo.Decision) (int64, error) {
	t := now
	if t == 0 {
		t = c.now()
	}
	if c.size.Load() > 0 && c.answer(checks, t, out) {
		c.local.Add(1)
		if c.onLocal != nil {
			c.onLocal()
		}
		return t, nil
	}
	used, err := c.next.Decide(ctx, checks, now, out)
	if err != nil {
		return used, err
	}
	c.record(checks, t, out)
	return used, nil
}

// answer fills out and reports true when checks are refused at local time t
// by a cached refusal and every check is known; out is undefined otherwise.
func (c *OverLimitCache) answer(checks []store.Check, t int64, out []algo.Decision) bool {
	refused := false
	for i := range checks {
		ch := &checks[i]
		e, ok := c.shard(ch.Key).get(ch.Key)
		if !ok || e.limit != ch.Limit || t < e.sent {
			return false
		}
		if ch.Cost >= e.cost && t < e.until {
			refused = true
			retry := e.until - t
			reset := e.resetAt - t
			if reset <= 0 {
				reset = retry
			}
			out[i] = algo.Decision{Remaining: e.remaining, RetryAfter: retry, ResetAfter: reset}
			continue
		}
		out[i] = algo.Decision{Allowed: true, Remaining: e.remaining, ResetAfter: max(e.resetAt-t, 0)}
	}
	return refused
}

// record remembers every check of a decision refused with a cacheable
// refusal, sent at local time t.
func (c *OverLimitCache) record(checks []store.Check, t int64, out []algo.Decision) {
	cacheable := false
	for i := range checks {
		if refusable(&checks[i], &out[i]) {
			cacheable = true
			break
		}
	}
	if !cacheable {
		return
	}
	for i := range checks {
		ch, d := &checks[i], &out[i]
		e := olEntry{key: ch.Key, limit: ch.Limit, sent: t, remaining: d.Remaining, resetAt: t + d.ResetAfter}
		if refusable(ch, d) {
			e.until, e.cost = t+d.RetryAfter, ch.Cost
		}
		c.size.Add(c.shard(ch.Key).put(&e))
	}
}

// refusable reports whether d is a refusal the cache may hold: not a
// Concurrency lease (releases end it early), with a cost and a wait.
func refusable(ch *store.Check, d *algo.Decision) bool {
	return !d.Allowed && d.RetryAfter > 0 && ch.Cost > 0 && ch.Limit.Kind != algo.Concurrency
}

func (c *OverLimitCache) shard(key string) *olShard {
	return &c.shards[maphash.String(c.seed, key)%uint64(len(c.shards))]
}

// get returns a copy of key's entry.
func (s *olShard) get(key string) (olEntry, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if e, ok := s.m[key]; ok {
		return *e, true
	}
	return olEntry{}, false
}

// put stores e's values under e.key as the newest entry, evicting the oldest
// at the bound, and returns the change in the number of entries (0 or 1).
func (s *olShard) put(e *olEntry) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[e.key]; ok {
		s.unlink(old)
		e.prev, e.next = nil, nil
		*old = *e
		s.pushBack(old)
		return 0
	}
	var slot *olEntry
	var added int64
	if len(s.m) >= s.max {
		// Reuse the evicted entry: no allocation at the bound.
		slot = s.head
		s.unlink(slot)
		delete(s.m, slot.key)
	} else {
		slot, added = new(olEntry), 1
	}
	*slot = *e
	slot.prev, slot.next = nil, nil
	s.m[slot.key] = slot
	s.pushBack(slot)
	return added
}

// unlink removes e from the write-order list; s.mu must be held.
func (s *olShard) unlink(e *olEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		s.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

// pushBack appends e as the newest entry; s.mu must be held.
func (s *olShard) pushBack(e *olEntry) {
	e.prev = s.tail
	if s.tail != nil {
		s.tail.next = e
	} else {
		s.head = e
	}
	s.tail = e
}

// Release forwards to the wrapped store (leases are never cached).
func (c *OverLimitCache) Release(ctx context.Context, checks []store.Check) error {
	return c.next.Release(ctx, checks)
}

// Refund always forwards to the wrapped store: a refund is never answered
// locally. A refund moves a key's state towards acceptance faster than
// time does, which the cache's reasoning does not allow for, so the keys
// refunded are forgotten first (a refusal recorded while the refunded
// charge stood would otherwise hold too long). Other instances' caches
// cannot know: their refusals of these keys may hold up to their
// Retry-After longer than the store's — stricter, never more lenient.
func (c *OverLimitCache) Refund(ctx context.Context, checks []store.Check, now int64) error {
	for i := range checks {
		c.Forget(checks[i].Key)
	}
	return c.next.Refund(ctx, checks, now)
}

// Forget drops what the cache remembers of key: the store has units for
// it again (an allotment's unused units given back), so its next decision
// goes to the store.
func (c *OverLimitCache) Forget(key string) {
	if c.size.Load() > 0 {
		c.size.Add(-c.shard(key).forget(key))
	}
}

// forget drops key's entry and returns how many entries went (0 or 1).
func (s *olShard) forget(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	if !ok {
		return 0
	}
	s.unlink(e)
	delete(s.m, key)
	return 1
}

// Close closes the wrapped store.
func (c *OverLimitCache) Close() error { return c.next.Close() }
