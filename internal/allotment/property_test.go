package allotment

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/testutil/redisserver"
)

// scale stretches the injected clock of the property tests: a window is
// a minute, so the store's expiry (PX, in the server's real ms) never
// ends a state before the injected clock has (the tests run faster than
// their clock, never slower).
const scale = 60

// TestPropertyFixedWindow: random request sequences over three instances
// with an injected clock. Per key and window (the decision's), the fleet
// admits at most the limit, and whenever a request is refused it has
// admitted at least the limit minus the units then held by the other
// instances (the under-admission bound); cold keys are decided exactly.
func TestPropertyFixedWindow(t *testing.T) {
	srv := redisserver.Start(t)
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			c := &clock{}
			c.ms.Store(base + rng.Int64N(scale*1000))
			fl := fleet(t, srv, 3, c, true)
			lim := algo.Limit{Kind: algo.FixedWindow, Count: 60 + rng.Int64N(200), Period: scale * 1000}
			set := &store.Allotment{Policy: "p", MaxFraction: 100 + rng.Int64N(900), TTL: scale * (100 + rng.Int64N(900))}
			type win struct {
				key string
				w   int64
			}
			admitted := map[win]int64{}
			for range 6000 {
				c.ms.Add(rng.Int64N(3 * scale))
				i := rng.IntN(len(fl))
				key := fmt.Sprintf("rl:%d:hot%d", seed, rng.IntN(3))
				if rng.IntN(10) == 0 {
					key = fmt.Sprintf("rl:%d:cold%d", seed, rng.IntN(2000))
				}
				now := c.now()
				w := win{key, now / lim.Period}
				held := outstanding(fl, i)
				d := decide(t, fl[i], key, lim, set, now)
				if d.Allowed {
					admitted[w]++
					if admitted[w] > lim.Count {
						t.Fatalf("%s window %d: %d admitted, limit %d (%v, %+v)", key, w.w, admitted[w], lim.Count, lim, *set)
					}
				} else if admitted[w] < lim.Count-held {
					t.Fatalf("%s window %d: refused at %d admitted with %d held elsewhere, limit %d", key, w.w, admitted[w], held, lim.Count)
				}
				if d.Allowed && d.Remaining < 0 {
					t.Fatalf("negative remaining %+v", d)
				}
			}
			if fetches(fl) == 0 {
				t.Fatal("no slice was fetched: the hot keys never got allotments")
			}
		})
	}
}

// TestPropertyTokenBucket: random request sequences over three instances.
// In every interval of length L the fleet admits at most B + rate·(L +
// ttl) per key, and at least what exact per-request decisions of the
// same sequence admit minus the largest total ever held in slices.
func TestPropertyTokenBucket(t *testing.T) {
	srv := redisserver.Start(t)
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			c := &clock{}
			c.ms.Store(base)
			fl := fleet(t, srv, 3, c, true)
			lim := algo.Limit{Kind: algo.TokenBucket, Count: 50 + rng.Int64N(500), Period: scale * 1000, Burst: 20 + rng.Int64N(200)}
			set := &store.Allotment{Policy: "p", MaxFraction: 100 + rng.Int64N(900), TTL: scale * (50 + rng.Int64N(500))}
			times := map[string][]int64{}
			var ref [3]algo.State // exact per-request decisions of the same sequence, per hot key
			var exact, got [3]int64
			var maxHeld int64 // the largest total held in slices so far
			for range 5000 {
				c.ms.Add(rng.Int64N(4 * scale))
				i := rng.IntN(len(fl))
				k := rng.IntN(3)
				key := fmt.Sprintf("rl:%d:hot%d", seed, k)
				now := c.now()
				maxHeld = max(maxHeld, outstanding(fl, -1))
				d := decide(t, fl[i], key, lim, set, now)
				e := lim.Decide(&ref[k], now, 1)
				if e.Allowed {
					exact[k]++
				}
				if d.Allowed {
					got[k]++
					times[key] = append(times[key], now)
				}
				// Under-admission: at most the largest total held.
				if got[k] < exact[k]-maxHeld {
					t.Fatalf("%s: %d admitted, exact %d, at most %d held", key, got[k], exact[k], maxHeld)
				}
			}
			for key, ts := range times {
				for a := range ts {
					for b := a; b < len(ts); b++ {
						L := ts[b] - ts[a]
						bound := lim.Burst + (lim.Count*(L+set.TTL)+lim.Period-1)/lim.Period
						if int64(b-a+1) > bound {
							t.Fatalf("%s: %d admitted in %d ms, bound B + rate·(L+ttl) = %d (%v, ttl %d)", key, b-a+1, L, bound, lim, set.TTL)
						}
					}
				}
			}
		})
	}
}
