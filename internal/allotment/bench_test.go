package allotment

import (
	"context"
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/testutil/redisserver"
)

// BenchmarkHotKey is one busy key decided from its slices on one
// instance: the request path of an allotment, fetches included (about
// one per slice, in the background).
func BenchmarkHotKey(b *testing.B) {
	srv := redisserver.Start(b)
	in := fleet(b, srv, 1, nil, false)[0]
	lim := algo.Limit{Kind: algo.FixedWindow, Count: 1_000_000_000_000, Period: 3_600_000}
	ck := [1]store.Check{{Key: "rl:{bench}:hot", Limit: lim, Cost: 1, Allot: &store.Allotment{Policy: "p", MaxFraction: 500, TTL: 1000}}}
	var out [1]algo.Decision
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := in.l.Decide(ctx, ck[:], 0, out[:]); err != nil || !out[0].Allowed {
			b.Fatal(err, out[0])
		}
	}
}

// TestHotKeyAllocationFree: a decision from a slice allocates nothing.
func TestHotKeyAllocationFree(t *testing.T) {
	srv := redisserver.Start(t)
	c := &clock{}
	c.ms.Store(base)
	in := fleet(t, srv, 1, c, true)[0]
	lim := algo.Limit{Kind: algo.FixedWindow, Count: 1_000_000, Period: 3_600_000}
	ck := [1]store.Check{{Key: "rl:{alloc}:hot", Limit: lim, Cost: 1, Allot: &store.Allotment{Policy: "p", MaxFraction: 1000, TTL: 3_600_000}}}
	var out [1]algo.Decision
	ctx := context.Background()
	for range 2 * DefaultHot { // hot, with a slice
		c.ms.Add(1)
		in.l.Decide(ctx, ck[:], c.now(), out[:])
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := in.l.Decide(ctx, ck[:], c.now(), out[:]); err != nil || !out[0].Allowed {
			t.Fatal(err, out[0])
		}
	}); n != 0 {
		t.Fatalf("%v allocations per decision from a slice, want 0", n)
	}
}
