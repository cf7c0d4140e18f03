package allotment

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/store/valkey"
	"rlproxy/internal/testutil/rediscluster"
)

// pacedClock is a test clock (Unix ms) that stands still within a round
// and between rounds steps by a fixed amount, or by twice the real time
// the round took if that is more. Valkey expires a key in real
// milliseconds (PX set from the injected clock's "now"): a clock that
// lagged real time would see a window's count expire before its edge and
// admit the limit twice. Running at least twice as fast, a key written in
// one round is read in a later round before the edge only while it lives,
// unless that later round alone took longer than all rounds since the
// write.
type pacedClock struct {
	ns    atomic.Int64 // the clock in Unix ns: sub-ms steps add up
	since time.Time    // when the round began
}

func (c *pacedClock) now() int64 { return c.ns.Load() / 1e6 }

// step ends a round.
func (c *pacedClock) step(d time.Duration) {
	t := time.Now()
	c.ns.Add(int64(max(d, 2*t.Sub(c.since))))
	c.since = t
}

// TestClusterSlots: two instances on a 3-master cluster, 24 hot keys in
// 24 distinct hash slots (over the masters), a fixed window across an edge
// (each key's next window prefetched on its own slot). Per key and window
// the fleet admits at most the limit, and once both instances returned
// their units the store's count of every key is exactly its admissions
// in the current window. The clock steps 10 ms per round (400 rounds
// per window on a fast machine; a slow one still has more than the
// limit while its rounds take under 20 ms).
func TestClusterSlots(t *testing.T) {
	cl := rediscluster.Start(t, 3)
	const W, count, keys, span = 60_000, 100, 24, 4000
	edge := (base/W + 1) * W
	c := &pacedClock{since: time.Now()}
	c.ns.Store((edge - span) * 1e6)
	var fl []*Layer
	for range 2 {
		vs, err := valkey.New(context.Background(), valkey.Options{Addrs: cl.Addrs, KeyPrefix: "rl:", Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		l := New(vs, vs, Options{Now: c.now, Go: func(f func()) { f() }})
		t.Cleanup(func() { l.Close() })
		fl = append(fl, l)
	}
	lim := algo.Limit{Kind: algo.FixedWindow, Count: count, Period: W}
	set := &store.Allotment{Policy: "p", MaxFraction: 500, TTL: W}
	cc := cl.Client(t)
	slots := map[int64]bool{}
	name := func(k int) string { return fmt.Sprintf("rl:{slot%d}:fw", k) }
	for k := range keys {
		s, err := cc.Do(context.Background(), cc.B().ClusterKeyslot().Key(name(k)).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		slots[s] = true
	}
	if len(slots) != keys {
		t.Fatalf("%d keys in %d slots", keys, len(slots))
	}
	admitted := map[string]int64{} // key@window
	c.since = time.Now()
	for r := 0; c.now() < edge+span; r++ {
		now := c.now()
		for k := range keys {
			var out [1]algo.Decision
			ck := [1]store.Check{{Key: name(k), Limit: lim, Cost: 1, Allot: set}}
			if _, err := fl[r%2].Decide(context.Background(), ck[:], now, out[:]); err != nil {
				t.Fatalf("%s: %v", name(k), err)
			}
			if out[0].Allowed {
				admitted[fmt.Sprintf("%s@%d", name(k), now/W)]++
			}
		}
		c.step(10 * time.Millisecond)
	}
	var f uint64
	for _, l := range fl {
		l.EachAllotment(func(_ string, _ int64, n uint64) { f += n })
		l.Close()
	}
	probe, err := valkey.New(context.Background(), valkey.Options{Addrs: cl.Addrs, KeyPrefix: "rl:", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	for k := range keys {
		before, after := admitted[fmt.Sprintf("%s@%d", name(k), edge/W-1)], admitted[fmt.Sprintf("%s@%d", name(k), edge/W)]
		if before != count || after != count {
			t.Errorf("%s: admitted %d before the edge and %d after, want %d and %d", name(k), before, after, count, count)
		}
		var out [1]algo.Decision
		ck := [1]store.Check{{Key: name(k), Limit: lim}}
		if _, err := probe.Decide(context.Background(), ck[:], c.now(), out[:]); err != nil {
			t.Fatal(err)
		}
		if out[0].Remaining != count-after {
			t.Errorf("%s: the store has %d left, want exactly %d - %d admitted", name(k), out[0].Remaining, count, after)
		}
	}
	t.Logf("%d keys in %d slots, %d fetches", keys, len(slots), f)
}
