package memory

import (
	"context"
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// TestRefund: the memory store's Refund undoes charges as algo's
// RefundLease (leaky bucket: the shaping scenario of the e2e test; a
// sliding log and a lease in the side map), creates no key, and leaves a
// key that now holds another kind alone.
func TestRefund(t *testing.T) {
	const b = algo.ReferenceBase
	ctx := context.Background()
	st := New(Options{MaxKeys: 100, SweepInterval: -1})
	defer st.Close()
	leaky := algo.Limit{Kind: algo.LeakyBucket, Count: 10, Period: 1000, Burst: 20}
	log := algo.Limit{Kind: algo.SlidingLog, Count: 5, Period: 1000}
	conc := algo.Limit{Kind: algo.Concurrency, Count: 2, Period: 10_000}
	checks := []store.Check{
		{Key: "{c}:lb", Limit: leaky, Cost: 1},
		{Key: "{c}:sl", Limit: log, Cost: 1},
	}
	out := make([]algo.Decision, 2)
	for range 5 {
		if _, err := st.Decide(ctx, checks, b, out); err != nil || !out[0].Allowed || !out[1].Allowed {
			t.Fatalf("charge: %+v %v", out, err)
		}
	}
	for range 3 {
		if err := st.Refund(ctx, checks, b); err != nil {
			t.Fatal(err)
		}
	}
	// Two requests kept: excess 1000 units; 50 ms later a request waits
	// (1000 − 500 + 1000)/10 = 150 ms; the log holds 2 of 5.
	if _, err := st.Decide(ctx, checks, b+50, out); err != nil {
		t.Fatal(err)
	}
	if want := (algo.Decision{Allowed: true, Remaining: 18, Wait: 150, ResetAfter: 250}); out[0] != want {
		t.Errorf("leaky bucket: %+v, want %+v", out[0], want)
	}
	if want := (algo.Decision{Allowed: true, Remaining: 2, ResetAfter: 1000}); out[1] != want {
		t.Errorf("sliding log: %+v, want %+v", out[1], want)
	}

	lease := []store.Check{{Key: "{c}:cc", Limit: conc, Cost: 1, Lease: "r1"}}
	one := out[:1]
	for _, id := range []string{"r1", "r2"} {
		lease[0].Lease = id
		if _, err := st.Decide(ctx, lease, b, one); err != nil || !one[0].Allowed {
			t.Fatalf("lease %s: %+v %v", id, one[0], err)
		}
	}
	lease[0].Lease = "r1"
	if err := st.Refund(ctx, lease, b); err != nil {
		t.Fatal(err)
	}
	lease[0].Lease = "r3"
	if _, err := st.Decide(ctx, lease, b+10, one); err != nil || !one[0].Allowed || one[0].Remaining != 0 {
		t.Fatalf("after refunding lease r1, r3: %+v %v; want accepted, 0 left", one[0], err)
	}

	keys := st.Len()
	if err := st.Refund(ctx, []store.Check{{Key: "{new}:lb", Limit: leaky, Cost: 1}}, b); err != nil {
		t.Fatal(err)
	}
	if st.Len() != keys {
		t.Errorf("refunding an unknown key added one: %d keys, want %d", st.Len(), keys)
	}
	// The leaky key refunded as a token bucket (a reload changed the
	// policy's kind under the same key): left alone.
	tb := algo.Limit{Kind: algo.TokenBucket, Count: 10, Period: 1000, Burst: 20}
	if err := st.Refund(ctx, []store.Check{{Key: "{c}:lb", Limit: tb, Cost: 5}}, b); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Decide(ctx, []store.Check{{Key: "{c}:lb", Limit: leaky}}, b+50, one); err != nil {
		t.Fatal(err)
	}
	if one[0].Remaining != 18 {
		t.Errorf("leaky bucket after a refund of another kind: %+v, want 18 remaining (unchanged)", one[0])
	}
}
