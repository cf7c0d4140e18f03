package memory

import (
	"context"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// Charge implements store.Store: under the locks of their shards, each
// check's Cost is added to its state at now unconditionally
// (algo.Limit.ForceCharge: the same charge the Valkey charge script
// makes), creating the state when there is none; the key's expiry becomes
// its new idle time. Checks of an algorithm that is not charged
// (algo.Algorithm.Charges: Concurrency) and cost 0 are ignored. now 0
// means the store's clock. It never fails.
func (s *Store) Charge(_ context.Context, checks []store.Check, now int64) error {
	var keyBuf [inline]key
	var shardBuf [inline]uint32
	keys, shards, now := s.lockChecks(checks, now, keyBuf[:0], shardBuf[:0])
	defer s.unlock(shards)
	for i := range checks {
		c := &checks[i]
		if c.Cost <= 0 || !algo.Describe(c.Limit.Kind).Charges() {
			continue
		}
		sh := s.shard(keys[i])
		slot, idx := sh.find(keys[i])
		var st algo.State // a copy: ForceCharge replaces the log, never its elements
		sh.load(idx, c.Limit.Kind, &st)
		c.Limit.ForceCharge(&st, now, c.Cost)
		s.save(sh, slot, idx, keys[i], &c.Limit, &st, now, c.Limit.IdleMillis(&st, now))
	}
	return nil
}

// lockChecks appends the hashes of checks' keys to keys and locks their
// shards (appended to shards), for Charge and Refund: release them with
// s.unlock(shards). It returns now, or the store's clock (Unix ms) when now
// is 0. The buffers are the caller's, so inline-sized decisions allocate
// nothing.
func (s *Store) lockChecks(checks []store.Check, now int64, keys []key, shards []uint32) ([]key, []uint32, int64) {
	for i := range checks {
		keys = append(keys, s.hash(checks[i].Key))
	}
	shards = s.lock(keys, shards)
	if now == 0 {
		now = s.clock()
	}
	return keys, shards, now
}
