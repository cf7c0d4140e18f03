package valkey

import (
	"context"
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// step is one decision at a fixed instant (ms after base) and its exact
// expected outcome; release ends the lease before deciding.
type step struct {
	at      int64
	cost    int64
	lease   string
	release string
	want    algo.Decision
}

// D abbreviates an expected decision.
func D(allowed bool, remaining, retryAfter, wait, resetAfter int64) algo.Decision {
	return algo.Decision{Allowed: allowed, Remaining: remaining, RetryAfter: retryAfter, Wait: wait, ResetAfter: resetAfter}
}

// runSteps runs steps in order on one fresh key and reports the failing step.
func runSteps(t *testing.T, st *Store, key string, l algo.Limit, steps []step) {
	t.Helper()
	for i, s := range steps {
		if s.release != "" {
			if err := st.Release(context.Background(), []store.Check{{Key: key, Limit: l, Lease: s.release}}); err != nil {
				t.Fatalf("step %d: Release(%s): %v", i, s.release, err)
			}
		}
		got := decide1(t, st, key, l, s.cost, s.lease, base+s.at)
		if got != s.want {
			t.Errorf("step %d (B+%d ms, cost %d, lease %q):\n got %+v\nwant %+v", i, s.at, s.cost, s.lease, got, s.want)
		}
	}
}

// TestSteps checks each algorithm's script against hand-computed
// docs/DESIGN.md arithmetic at fixed instants.
func TestSteps(t *testing.T) {
	st, srv := newStore(t)
	tests := []struct {
		name  string
		limit algo.Limit
		steps []step
	}{
		{"fixed window 3 per 1 s", algo.Limit{Kind: algo.FixedWindow, Count: 3, Period: 1000}, []step{
			{at: 0, cost: 1, want: D(true, 2, 0, 0, 1000)},
			{at: 10, cost: 1, want: D(true, 1, 0, 0, 990)},
			{at: 20, cost: 1, want: D(true, 0, 0, 0, 980)},
			{at: 30, cost: 1, want: D(false, 0, 970, 0, 970)},
			{at: 40, cost: 0, want: D(true, 0, 0, 0, 960)},
			{at: 999, cost: 1, want: D(false, 0, 1, 0, 1)},
			{at: 1000, cost: 2, want: D(true, 1, 0, 0, 1000)},
			{at: 1500, cost: 2, want: D(false, 1, 500, 0, 500)},
			{at: 1500, cost: 1, want: D(true, 0, 0, 0, 500)},
			{at: 5000, cost: 1, want: D(true, 2, 0, 0, 1000)},
		}},
		{"sliding log 3 per 1 s", algo.Limit{Kind: algo.SlidingLog, Count: 3, Period: 1000}, []step{
			{at: 0, cost: 1, want: D(true, 2, 0, 0, 1000)},
			{at: 0, cost: 1, want: D(true, 1, 0, 0, 1000)}, // same ms: a second member
			{at: 500, cost: 1, want: D(true, 0, 0, 0, 1000)},
			{at: 600, cost: 1, want: D(false, 0, 400, 0, 900)},
			{at: 600, cost: 2, want: D(false, 0, 400, 0, 900)},
			{at: 600, cost: 0, want: D(true, 0, 0, 0, 900)},
			{at: 1000, cost: 1, want: D(true, 1, 0, 0, 1000)}, // both B+0 entries left
			{at: 1000, cost: 2, want: D(false, 1, 500, 0, 1000)},
		}},
		{"sliding counter 10 per 10 s", algo.Limit{Kind: algo.SlidingWindow, Count: 10, Period: 10_000}, []step{
			{at: 9500, cost: 9, want: D(true, 1, 0, 0, 500)},
			{at: 9950, cost: 1, want: D(true, 0, 0, 0, 50)},
			// Next window, prev = 10: first fits at el = 1 (estimate 9.999).
			{at: 9960, cost: 1, want: D(false, 0, 41, 0, 40)},
			{at: 10_000, cost: 1, want: D(false, 0, 1, 0, 10_000)},
			{at: 10_001, cost: 1, want: D(true, 0, 0, 0, 9999)},
			// 10·0.95 + 1 = 10.5: fits once 10·(W-el) + 10000 < 100000, el = 1001.
			{at: 10_500, cost: 1, want: D(false, 0, 501, 0, 9500)},
			{at: 15_000, cost: 1, want: D(true, 3, 0, 0, 5000)},
			{at: 35_000, cost: 1, want: D(true, 9, 0, 0, 5000)}, // two windows on: idle
		}},
		{"token bucket 5 at 30r/m", algo.Limit{Kind: algo.TokenBucket, Count: 30, Period: 60_000, Burst: 5}, []step{
			{at: 0, cost: 1, want: D(true, 4, 0, 0, 2000)},
			{at: 0, cost: 1, want: D(true, 3, 0, 0, 4000)},
			{at: 0, cost: 1, want: D(true, 2, 0, 0, 6000)},
			{at: 0, cost: 1, want: D(true, 1, 0, 0, 8000)},
			{at: 0, cost: 1, want: D(true, 0, 0, 0, 10_000)},
			{at: 0, cost: 1, want: D(false, 0, 2000, 0, 10_000)},
			{at: 1000, cost: 1, want: D(false, 0, 1000, 0, 9000)},
			{at: 2000, cost: 1, want: D(true, 0, 0, 0, 10_000)},
			{at: 100_000, cost: 3, want: D(true, 2, 0, 0, 6000)},
		}},
		{"leaky bucket 2r/s burst 2 delay 1", algo.Limit{Kind: algo.LeakyBucket, Count: 2, Period: 1000, Burst: 2, Delay: 1}, []step{
			{at: 0, cost: 1, want: D(true, 2, 0, 0, 500)},
			{at: 0, cost: 1, want: D(true, 1, 0, 0, 1000)},
			{at: 0, cost: 1, want: D(true, 0, 0, 500, 1500)},
			{at: 0, cost: 1, want: D(false, 0, 500, 0, 1500)},
			{at: 499, cost: 1, want: D(false, 0, 1, 0, 1001)},
			{at: 500, cost: 1, want: D(true, 0, 0, 500, 1500)},
			{at: 10_000, cost: 1, want: D(true, 2, 0, 0, 500)}, // long idle: clamped, exact
		}},
		{"leaky bucket 2r/s burst 2 nodelay", algo.Limit{Kind: algo.LeakyBucket, Count: 2, Period: 1000, Burst: 2, NoDelay: true}, []step{
			{at: 0, cost: 1, want: D(true, 2, 0, 0, 500)},
			{at: 0, cost: 1, want: D(true, 1, 0, 0, 1000)},
			{at: 0, cost: 1, want: D(true, 0, 0, 0, 1500)},
			{at: 0, cost: 1, want: D(false, 0, 500, 0, 1500)},
		}},
		{"concurrency 2 leases of 1 s", algo.Limit{Kind: algo.Concurrency, Count: 2, Period: 1000}, []step{
			{at: 0, cost: 1, lease: "a", want: D(true, 1, 0, 0, 1000)},
			{at: 100, cost: 1, lease: "b", want: D(true, 0, 0, 0, 1000)},
			{at: 200, cost: 1, lease: "c", want: D(false, 0, 800, 0, 900)},
			{at: 300, cost: 1, lease: "a", want: D(true, 0, 0, 0, 1000)}, // refresh
			{at: 400, cost: 1, lease: "c", release: "b", want: D(true, 0, 0, 0, 1000)},
			{at: 1400, cost: 1, lease: "d", want: D(true, 1, 0, 0, 1000)}, // a, c expired
		}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runSteps(t, st, "rl:v2:{steps}:"+string(rune('a'+i)), tc.limit, tc.steps)
		})
	}
	t.Run("sliding log members", func(t *testing.T) {
		got, err := srv.Do(t, "ZRANGE", "rl:v2:{steps}:b", "0", "-1").AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"1000000000500:0", "1000000001000:0"}
		if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("members %q, want %q", got, want)
		}
	})
}
