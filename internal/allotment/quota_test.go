package allotment

import (
	"context"
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/testutil/redisserver"
)

// TestPeekAddsHeld: a look that charges nothing (cost 0: the quota
// endpoint, the admin quota lookup) reports the store's remaining plus
// the units the asking instance holds for the key, so through either
// instance it is the limit minus the fleet's admissions minus only what
// the other instance holds; with nothing held elsewhere, exact.
func TestPeekAddsHeld(t *testing.T) {
	srv := redisserver.Start(t)
	for _, lim := range []algo.Limit{
		{Kind: algo.FixedWindow, Count: 1000, Period: 60_000},
		{Kind: algo.TokenBucket, Count: 1, Period: 60_000, Burst: 1000},
	} {
		t.Run(lim.Kind.String(), func(t *testing.T) {
			c := &clock{}
			c.ms.Store(base)
			fl := fleet(t, srv, 2, c, true)
			set := &store.Allotment{Policy: "p", MaxFraction: 500, TTL: 30_000}
			key := "rl:peek:" + lim.Kind.String()
			peek := func(in instance) int64 {
				var out [1]algo.Decision
				ck := [1]store.Check{{Key: key, Limit: lim, Allot: set}}
				if _, err := in.l.Decide(context.Background(), ck[:], c.now(), out[:]); err != nil {
					t.Fatal(err)
				}
				return out[0].Remaining
			}
			var admitted int64
			for i, n := range []int{40, 30} { // each instance heats the key and takes a slice
				for range n {
					if decide(t, fl[i], key, lim, set, c.now()).Allowed {
						admitted++
					}
				}
			}
			heldA, heldB := outstanding(fl, 1), outstanding(fl, 0)
			if admitted != 70 || heldA == 0 || heldB == 0 {
				t.Fatalf("admitted %d, held %d and %d: want 70 admitted and both holding slices", admitted, heldA, heldB)
			}
			if got, want := peek(fl[0]), 1000-admitted-heldB; got != want {
				t.Errorf("through the first instance: remaining %d, want 1000 - %d admitted - %d held by the other = %d", got, admitted, heldB, want)
			}
			if got, want := peek(fl[1]), 1000-admitted-heldA; got != want {
				t.Errorf("through the second instance: remaining %d, want 1000 - %d admitted - %d held by the other = %d", got, admitted, heldA, want)
			}
			fl[1].l.Close() // gives its units back: the first instance's figure is exact
			if got, want := peek(fl[0]), 1000-admitted; got != want {
				t.Errorf("with nothing held elsewhere: remaining %d, want exactly %d", got, want)
			}
		})
	}
}
