package allotment

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"testing"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/store/valkey"
	"rlproxy/internal/testutil/faultrelay"
	"rlproxy/internal/testutil/redisserver"
)

// TestWindowEdgePrefetch: two instances with an injected clock, a hot key
// every 5 ms round robin across three window edges. Each instance fetches
// the next window's slice in the current one's last ms (charged to the
// next window in Valkey), so once both hold slices no decision reaches
// the store, also at the edges; with a limit that is reached, every
// window admits at most the limit, and a refusal comes only once the
// fleet admitted the limit minus the units the other instance held.
// Closing the instances returns the next window's units they hold ahead
// exactly.
func TestWindowEdgePrefetch(t *testing.T) {
	srv := redisserver.Start(t)
	const W = 60_000
	for _, count := range []int64{1_000_000_000, 5000} {
		t.Run(fmt.Sprint(count), func(t *testing.T) {
			edge := (base/W + 1) * W // the first
			c := &clock{}
			c.ms.Store(edge - 2_000)
			var fl []instance
			var next []*countingStore
			for range 2 {
				vs, err := valkey.New(context.Background(), valkey.Options{Addrs: []string{srv.Addr}, KeyPrefix: "rl:", Timeout: 5 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				cs := &countingStore{Store: vs}
				l := New(cs, vs, Options{Now: c.now, Go: func(f func()) { f() }})
				t.Cleanup(func() { l.Close() })
				fl, next = append(fl, instance{vs, l}), append(next, cs)
			}
			lim := algo.Limit{Kind: algo.FixedWindow, Count: count, Period: W}
			set := &store.Allotment{Policy: "p", MaxFraction: 500, TTL: W}
			key := "rl:edge:" + time.Now().Format("150405.000000")
			admitted := map[int64]int64{}
			var warm int64 // store decisions before the first edge
			for i := 0; c.now() < edge+3*W; i++ {
				now := c.now()
				if now == edge {
					warm = next[0].n.Load() + next[1].n.Load()
				}
				held := outstanding(fl, i%2)
				if decide(t, fl[i%2], key, lim, set, now).Allowed {
					admitted[now/W]++
				} else if w := now / W; admitted[w] < count-held {
					t.Fatalf("window %d: refused at %d admitted with %d held by the other instance, limit %d", w, admitted[w], held, count)
				}
				c.ms.Add(5)
			}
			for w, n := range admitted {
				if n > count {
					t.Errorf("window %d: %d admitted, limit %d", w, n, count)
				}
			}
			if count > 12_000 { // never reached: the store decides nothing after the warm-up
				if n := next[0].n.Load() + next[1].n.Load() - warm; n != 0 {
					t.Errorf("%d decisions reached the store after the first edge, want 0", n)
				}
				for w := edge / W; w < edge/W+3; w++ {
					if admitted[w] != W/5 {
						t.Errorf("window %d: %d admitted, want all %d", w, admitted[w], W/5)
					}
				}
			}
			// The instances hold the next window's slices, charged ahead;
			// closing returns them: that window is untouched again.
			var ahead int64
			for _, in := range fl {
				e := in.l.shards[maphash.String(in.l.seed, key)%shards].m[key]
				ahead += e.ahead.units
				in.l.Close()
			}
			var out [1]algo.Decision
			ck := [1]store.Check{{Key: key, Limit: lim}}
			if _, err := fl[0].vs.Decide(context.Background(), ck[:], c.now(), out[:]); err != nil {
				t.Fatal(err)
			}
			if ahead == 0 || out[0].Remaining != count {
				t.Errorf("next window: %d left after returning the %d units held ahead, want all %d", out[0].Remaining, ahead, count)
			}
			t.Logf("limit %d: admitted per window %v, %d fetches, %d store decisions (%d before the first edge), %d units held ahead at the end", count, admitted, fetches(fl), next[0].n.Load()+next[1].n.Load(), warm, ahead)
		})
	}
}

// TestFarFromStoreWindowEdges: an instance 80 ms each way from Valkey
// (the fault relay), on the store's clock, a busy fixed-window key of
// 1 s windows. The ramp-up (as in TestFarFromStore: each slice sized to
// the rate the last was spent at) ends once 2 s (2 window edges) passed
// without a decision in the store. In the 5 s after it no decision
// waits on the store, also across the window edges (each next window's
// slice is fetched before the edge; a decision within the clocks'
// uncertainty of the edge is paid from both windows), and the p99 of a
// decision stays below 2.5 ms.
func TestFarFromStoreWindowEdges(t *testing.T) {
	if testing.Short() {
		t.Skip("at least 7 s of traffic")
	}
	srv := redisserver.Start(t)
	relay := faultrelay.Start(t, srv.Addr)
	vs, err := valkey.New(context.Background(), valkey.Options{Addrs: []string{relay.Addr()}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	next := &countingStore{Store: vs}
	l := New(next, vs, Options{SweepEvery: 100 * time.Millisecond})
	t.Cleanup(func() { l.Close() })
	relay.Delay(80 * time.Millisecond)
	lim := algo.Limit{Kind: algo.FixedWindow, Count: 1_000_000_000, Period: 1000}
	ck := [1]store.Check{{Key: "rl:{far}:fw", Limit: lim, Cost: 1, Allot: &store.Allotment{Policy: "p", MaxFraction: 500, TTL: 10_000}}}
	var out [1]algo.Decision
	decide := func() (int64, time.Duration) {
		start := time.Now()
		at, err := l.Decide(context.Background(), ck[:], 0, out[:])
		if err != nil || !out[0].Allowed {
			t.Fatal(err, out[0])
		}
		return at, time.Since(start)
	}
	begin, quiet, asked := time.Now(), time.Now(), next.n.Load()
	for time.Since(quiet) < 2*time.Second {
		decide()
		if n := next.n.Load(); n != asked {
			quiet, asked = time.Now(), n
		}
		if time.Since(begin) > 30*time.Second {
			t.Fatalf("decisions still reach the store after 30 s (%d fetches)", fetches([]instance{{vs, l}}))
		}
	}
	rampUp := time.Since(begin)
	var lat []time.Duration
	wins := map[int64]bool{}
	for stop := time.Now().Add(5 * time.Second); time.Now().Before(stop); {
		at, d := decide()
		lat = append(lat, d)
		wins[at/lim.Period] = true
	}
	slices.Sort(lat)
	p99, worst := lat[len(lat)*99/100], lat[len(lat)-1]
	t.Logf("%d decisions over %d windows after a ramp-up of %v: p99 %v, worst %v; %d fetches, %d store decisions before", len(lat), len(wins), rampUp, p99, worst, fetches([]instance{{vs, l}}), asked)
	if n := next.n.Load() - asked; n != 0 {
		t.Errorf("%d decisions waited on the store after the ramp-up", n)
	}
	if len(wins) < 4 {
		t.Errorf("decisions in %d windows, want at least 4 (3 edges)", len(wins))
	}
	if p99 > 2500*time.Microsecond {
		t.Errorf("p99 %v, want at most 2.5 ms", p99)
	}
}
