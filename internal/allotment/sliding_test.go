package allotment

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/testutil/redisserver"
)

// TestPropertySlidingCounter: random request sequences over three
// instances with an injected clock, on epoch windows and on calendar
// days. The per-request counter (algo's sliding window, the reference),
// fed the fleet's admissions in order, accepts every one of them: the
// fleet never admits more than the counter would. And whenever the fleet
// refuses, the counter would refuse a request costing one more than the
// units the other instances hold (the under-admission bound).
func TestPropertySlidingCounter(t *testing.T) {
	srv := redisserver.Start(t)
	cal, err := algo.NewCalendar(algo.Day, "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 13))
			c := &clock{}
			lim := algo.Limit{Kind: algo.SlidingWindow, Count: 60 + rng.Int64N(200), Period: scale * 1000}
			step := int64(3 * scale)
			c.ms.Store(base + rng.Int64N(scale*1000))
			if seed%2 == 1 { // a calendar day, from an hour before midnight
				lim.Period, lim.Calendar = cal.Longest(), cal
				step = 3 * 3600 * 1000 / 6000
				c.ms.Store(cal.SpanAt(base).End - 3600*1000)
			}
			fl := fleet(t, srv, 3, c, true)
			set := &store.Allotment{Policy: "p", MaxFraction: 100 + rng.Int64N(900), TTL: scale * (100 + rng.Int64N(900))}
			var ref [3]algo.State // the counter on the fleet's admissions, per hot key
			var admitted, refused int
			for range 6000 {
				c.ms.Add(rng.Int64N(step))
				i, k := rng.IntN(len(fl)), rng.IntN(3)
				key := fmt.Sprintf("rl:sw%d:hot%d", seed, k)
				now := c.now()
				held := outstanding(fl, i)
				if decide(t, fl[i], key, lim, set, now).Allowed {
					admitted++
					if !lim.Decide(&ref[k], now, 1).Allowed {
						t.Fatalf("%s at %d: admitted, but the counter on the fleet's admissions refuses it (%v, %+v)", key, now, lim, ref[k])
					}
					continue
				}
				refused++
				cp := ref[k]
				if lim.Decide(&cp, now, 1+held).Allowed {
					t.Fatalf("%s at %d: refused, yet the counter accepts 1 + the %d units held elsewhere (%+v)", key, now, held, ref[k])
				}
			}
			if fetches(fl) == 0 || refused == 0 {
				t.Fatalf("%d fetches, %d refused: want slices and the limit reached", fetches(fl), refused)
			}
			t.Logf("%d admitted, %d refused, %d fetches", admitted, refused, fetches(fl))
		})
	}
}
