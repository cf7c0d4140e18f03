package allotment

import (
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/testutil/redisserver"
)

// TestKilledInstance: an instance that dies holding slices never gives
// them back; its unspent units stay charged until the window ends (fixed
// window) or the refill repays them (token bucket), and the survivors
// admit exactly the rest: at most the limit, at least the limit minus
// what the dead one held.
func TestKilledInstance(t *testing.T) {
	srv := redisserver.Start(t)
	for _, lim := range []algo.Limit{
		{Kind: algo.FixedWindow, Count: 200, Period: 60_000},
		{Kind: algo.TokenBucket, Count: 1, Period: 60_000, Burst: 200},
	} {
		t.Run(lim.Kind.String(), func(t *testing.T) {
			c := &clock{}
			c.ms.Store(base)
			fl := fleet(t, srv, 2, c, true)
			set := &store.Allotment{Policy: "p", MaxFraction: 500, TTL: 30_000}
			key := "rl:kill:" + lim.Kind.String()
			admitted := int64(0)
			for range 40 { // the first instance heats the key and takes a slice
				if decide(t, fl[0], key, lim, set, c.now()).Allowed {
					admitted++
				}
			}
			held := outstanding(fl, 1)
			if held == 0 {
				t.Fatal("the first instance holds no slice")
			}
			// Killed: no Close, no return. The second instance spends the rest.
			for range 400 {
				c.ms.Add(10)
				if decide(t, fl[1], key, lim, set, c.now()).Allowed {
					admitted++
				}
			}
			if want := 200 - held; admitted != want {
				t.Fatalf("admitted %d, want the limit minus the %d units the dead instance held: %d", admitted, held, want)
			}
			// The window's end (or the refill) frees them.
			c.ms.Add(60_000)
			if !decide(t, fl[1], key, lim, set, c.now()).Allowed {
				t.Fatal("refused after the window ended")
			}
		})
	}
}
