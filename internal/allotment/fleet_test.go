package allotment

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/store/valkey"
	"rlproxy/internal/testutil/redisserver"
)

// admission is one admitted request: its key and the time of its
// decision (the store's, or the local one of a slice).
type admission struct {
	key string
	at  int64
}

// hammer sends requests for each of keys from one goroutine per key
// (one connection per key), round robin over the instances, until d has
// passed, and returns the admissions and the count of requests.
func hammer(t *testing.T, fl []instance, keys []string, lim algo.Limit, set *store.Allotment, d time.Duration) ([]admission, int64) {
	t.Helper()
	var mu sync.Mutex
	var adm []admission
	var sent int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for _, key := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []admission
			var n int64
			ck := [1]store.Check{{Key: key, Limit: lim, Cost: 1, Allot: set}}
			var out [1]algo.Decision
			for i := 0; time.Now().Before(stop); i++ {
				at, err := fl[i%len(fl)].l.Decide(context.Background(), ck[:], 0, out[:])
				if err != nil {
					t.Errorf("Decide: %v", err)
					return
				}
				n++
				if out[0].Allowed {
					mine = append(mine, admission{key, at})
				}
			}
			mu.Lock()
			adm, sent = append(adm, mine...), sent+n
			mu.Unlock()
		}()
	}
	wg.Wait()
	return adm, sent
}

// TestFleetFixedWindow: three instances on one redis-server, five hot
// keys at one connection each and many cold keys. Per key and decision
// window the fleet admits at most the limit; cold keys are decided
// exactly (two of three per window) and take no slice.
func TestFleetFixedWindow(t *testing.T) {
	srv := redisserver.Start(t)
	fl := fleet(t, srv, 3, nil, false)
	lim := algo.Limit{Kind: algo.FixedWindow, Count: 1500, Period: 1000}
	set := &store.Allotment{Policy: "hot", MaxFraction: 500, TTL: 1000}
	keys := []string{"rl:{a}:hot", "rl:{b}:hot", "rl:{c}:hot", "rl:{d}:hot", "rl:{e}:hot"}
	var cold sync.WaitGroup
	coldLim := algo.Limit{Kind: algo.FixedWindow, Count: 2, Period: 60_000}
	coldSet := &store.Allotment{Policy: "cold", MaxFraction: 500, TTL: 1000}
	coldAdm := make([]map[int64]int, 2000)
	cold.Add(1)
	go func() { // quiet clients beside the hot ones: three requests each, one per instance
		defer cold.Done()
		for k := range coldAdm {
			coldAdm[k] = map[int64]int{}
			for i := range 3 {
				var out [1]algo.Decision
				ck := [1]store.Check{{Key: fmt.Sprintf("rl:{c%d}:cold", k), Limit: coldLim, Cost: 1, Allot: coldSet}}
				at, err := fl[i].l.Decide(context.Background(), ck[:], 0, out[:])
				if err != nil {
					t.Errorf("cold Decide: %v", err)
					return
				}
				if out[0].Allowed {
					coldAdm[k][at/coldLim.Period]++
				}
			}
		}
	}()
	adm, sent := hammer(t, fl, keys, lim, set, 2500*time.Millisecond)
	cold.Wait()
	perWin := map[string]int64{}
	for _, a := range adm {
		perWin[fmt.Sprintf("%s@%d", a.key, a.at/lim.Period)]++
	}
	full := 0
	for w, n := range perWin {
		if n > lim.Count {
			t.Errorf("%s: %d admitted, limit %d", w, n, lim.Count)
		}
		if n == lim.Count {
			full++
		}
	}
	t.Logf("%d requests, %d admitted in %d key-windows (%d full), %d fetches", sent, len(adm), len(perWin), full, fetches(fl))
	for k, wins := range coldAdm {
		total := 0
		for _, n := range wins {
			total += n
			if n > 2 {
				t.Fatalf("cold key %d: %d admitted in one window, limit 2", k, n)
			}
		}
		if len(wins) == 1 && total != 2 {
			t.Fatalf("cold key %d: %d of 3 admitted in one window, want exactly 2", k, total)
		}
	}
	for _, in := range fl {
		in.l.EachAllotment(func(p string, _ int64, f uint64) {
			if p == "cold" && f > 0 {
				t.Errorf("cold keys took %d slices", f)
			}
		})
	}
}

// TestFleetTokenBucket: the hot keys of a token bucket admit, across the
// fleet, at most B + rate·(L + ttl) in every interval of length L.
func TestFleetTokenBucket(t *testing.T) {
	srv := redisserver.Start(t)
	fl := fleet(t, srv, 3, nil, false)
	lim := algo.Limit{Kind: algo.TokenBucket, Count: 2000, Period: 1000, Burst: 300}
	set := &store.Allotment{Policy: "hot", MaxFraction: 500, TTL: 300}
	keys := []string{"rl:{a}:tb", "rl:{b}:tb", "rl:{c}:tb", "rl:{d}:tb", "rl:{e}:tb"}
	adm, sent := hammer(t, fl, keys, lim, set, 2*time.Second)
	byKey := map[string][]int64{}
	for _, a := range adm {
		byKey[a.key] = append(byKey[a.key], a.at)
	}
	for key, ts := range byKey {
		slices.Sort(ts)
		for a := range ts {
			for b := a; b < len(ts); b++ {
				bound := lim.Burst + ceilDiv(lim.Count*(ts[b]-ts[a]+set.TTL), lim.Period)
				if int64(b-a+1) > bound {
					t.Fatalf("%s: %d admitted in %d ms, bound %d", key, b-a+1, ts[b]-ts[a], bound)
				}
			}
		}
	}
	t.Logf("%d requests, %d admitted, %d fetches", sent, len(adm), fetches(fl))
}

// TestFleetFetches: at one connection per hot key, under a limit never
// reached, the fleet fetches at most one slice per 8 admitted requests.
func TestFleetFetches(t *testing.T) {
	srv := redisserver.Start(t)
	fl := fleet(t, srv, 3, nil, false)
	lim := algo.Limit{Kind: algo.FixedWindow, Count: 1_000_000_000, Period: 60_000}
	set := &store.Allotment{Policy: "hot", MaxFraction: 500, TTL: 1000}
	keys := []string{"rl:{a}:f", "rl:{b}:f", "rl:{c}:f", "rl:{d}:f", "rl:{e}:f"}
	adm, sent := hammer(t, fl, keys, lim, set, 1500*time.Millisecond)
	f := fetches(fl)
	t.Logf("%d requests, %d admitted, %d fetches", sent, len(adm), f)
	if int64(len(adm)) != sent {
		t.Errorf("%d of %d admitted under a limit never reached", len(adm), sent)
	}
	if f*8 > uint64(len(adm)) {
		t.Errorf("%d fetches for %d admitted: more than 1/8", f, len(adm))
	}
}

// TestReturnedNamesTheKey: once a slice's unused units are back in the
// store, Options.Returned is told the key (the server forgets the
// over-limit cache's refusal of it there), after the refund was answered.
func TestReturnedNamesTheKey(t *testing.T) {
	srv := redisserver.Start(t)
	c := &clock{}
	c.ms.Store(base)
	vs, err := valkey.New(context.Background(), valkey.Options{Addrs: []string{srv.Addr}, KeyPrefix: "rl:", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var l *Layer
	var returned []string
	var heldThen []int64
	l = New(vs, vs, Options{Now: c.now, Go: func(f func()) { f() }, Returned: func(key string) {
		returned = append(returned, key)
		heldThen = append(heldThen, outstanding([]instance{{vs, l}}, -1))
	}})
	defer l.Close()
	lim := algo.Limit{Kind: algo.FixedWindow, Count: 1000, Period: 3_600_000}
	set := &store.Allotment{Policy: "p", MaxFraction: 500, TTL: 1000}
	in := instance{vs, l}
	for i := 0; outstanding([]instance{in}, -1) == 0; i++ {
		if i == 100 {
			t.Fatal("no slice after 100 decisions")
		}
		decide(t, in, "rl:{ret}:k", lim, set, 0)
	}
	c.ms.Add(2000) // past the slice's ttl
	l.Sweep(c.now())
	if len(returned) != 1 || returned[0] != "rl:{ret}:k" || heldThen[0] != 0 {
		t.Fatalf("Returned told %q with %v units still held, want the key once, 0 held", returned, heldThen)
	}
}
