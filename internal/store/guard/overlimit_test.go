package guard

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/store/memory"
)

const t0 = int64(1_000_000_000_000) // a round Unix ms: windows start on it

var (
	fw3  = algo.Limit{Kind: algo.FixedWindow, Count: 3, Period: 1000}
	tb2  = algo.Limit{Kind: algo.TokenBucket, Count: 1, Period: 1000, Burst: 2} // 1 token/s, capacity 2
	tb3  = algo.Limit{Kind: algo.TokenBucket, Count: 1, Period: 1000, Burst: 3}
	conc = algo.Limit{Kind: algo.Concurrency, Count: 1, Period: 5000}
)

func deny(rem, retry, reset int64) algo.Decision {
	return algo.Decision{Remaining: rem, RetryAfter: retry, ResetAfter: reset}
}

func allow(rem, reset int64) algo.Decision {
	return algo.Decision{Allowed: true, Remaining: rem, ResetAfter: reset}
}

// TestOverLimitSteps checks at fixed instants which decisions the cache
// answers locally (the store's call count does not move) and the exact
// decisions it gives, against refStore's arithmetic.
func TestOverLimitSteps(t *testing.T) {
	x := []store.Check{{Key: "{a}:fw", Limit: fw3}}                              // route X
	y := []store.Check{{Key: "{a}:fw", Limit: fw3}, {Key: "{a}:tb", Limit: tb2}} // route Y
	v := []store.Check{{Key: "{b}:tb", Limit: tb2}}                              // route V
	v3 := []store.Check{{Key: "{b}:tb", Limit: tb3}}                             // V after a reload
	z := func(lease string) []store.Check {
		return []store.Check{{Key: "{a}:conc", Limit: conc, Lease: lease}}
	}
	steps := []struct {
		at     int64
		checks []store.Check
		cost   int64
		local  bool
		want   []algo.Decision
	}{
		{0, x, 1, false, []algo.Decision{allow(2, 1000)}},
		{100, x, 1, false, []algo.Decision{allow(1, 900)}},
		{200, x, 1, false, []algo.Decision{allow(0, 800)}},
		{300, x, 1, false, []algo.Decision{deny(0, 700, 700)}}, // cached until 1000
		{400, x, 1, true, []algo.Decision{deny(0, 600, 600)}},
		{400, x, 0, false, []algo.Decision{allow(0, 600)}},                  // a peek asks the store
		{500, y, 1, false, []algo.Decision{deny(0, 500, 500), allow(2, 0)}}, // {a}:tb unknown: store
		{600, y, 1, true, []algo.Decision{deny(0, 400, 400), allow(2, 0)}},  // now known
		{999, x, 1, true, []algo.Decision{deny(0, 1, 1)}},                   // last refused ms
		{1000, x, 1, false, []algo.Decision{allow(2, 1000)}},                // next window: store
		{1000, v, 2, false, []algo.Decision{allow(0, 2000)}},                // bucket emptied
		{1300, v, 1, false, []algo.Decision{deny(0, 700, 1700)}},            // 300 units of 1000
		{1500, v, 1, true, []algo.Decision{deny(0, 500, 1500)}},             // exact: store says the same
		{1500, v, 2, true, []algo.Decision{deny(0, 500, 1500)}},             // larger cost: lower bound (store: 1500)
		{2000, v, 2, false, []algo.Decision{deny(1, 1000, 1000)}},           // cost-2 refusal replaces it
		{2100, v, 1, false, []algo.Decision{allow(0, 1900)}},                // cost 1 < 2: store, accepted
		{2200, v, 2, true, []algo.Decision{deny(1, 800, 800)}},              // store would say 1800: lower bound
		{2200, v3, 2, false, []algo.Decision{deny(0, 1800, 2800)}},          // other Limit: store
		{3000, z("r1"), 1, false, []algo.Decision{allow(0, 5000)}},          //
		{3000, z("r2"), 1, false, []algo.Decision{deny(0, 5000, 5000)}},     // leases are not cached
		{3001, z("r2"), 1, false, []algo.Decision{deny(0, 4999, 4999)}},     //
		{3001, append(z("r3"), x...), 1, false, []algo.Decision{deny(0, 4999, 4999), allow(3, 999)}},
	}
	rs := counting(newRefStore(nil))
	c := NewOverLimitCache(rs, OverLimitOptions{})
	locals := 0
	for i, s := range steps {
		checks := make([]store.Check, len(s.checks))
		copy(checks, s.checks)
		for j := range checks {
			checks[j].Cost = s.cost
		}
		before := rs.callCount()
		out := make([]algo.Decision, len(checks))
		used, err := c.Decide(context.Background(), checks, t0+s.at, out)
		if err != nil || used != t0+s.at {
			t.Fatalf("step %d (at +%d): used %d, err %v", i, s.at, used, err)
		}
		if local := rs.callCount() == before; local != s.local {
			t.Fatalf("step %d (at +%d): answered locally = %v, want %v", i, s.at, local, s.local)
		}
		if s.local {
			locals++
		}
		if fmt.Sprint(out) != fmt.Sprint(s.want) {
			t.Fatalf("step %d (at +%d): decisions %+v, want %+v", i, s.at, out, s.want)
		}
		if got := c.LocalRefusals(); got != uint64(locals) {
			t.Fatalf("step %d (at +%d): LocalRefusals = %d, want %d", i, s.at, got, locals)
		}
	}
}

// TestOverLimitOwnClock checks that with now = 0 the refusal is anchored at
// the local time read before sending, so it ends no later than the store's:
// here the store's clock runs 7 ms ahead of the local one (the round trip).
func TestOverLimitOwnClock(t *testing.T) {
	var local int64
	rs := counting(newRefStore(func() int64 { return local + 7 }))
	c := NewOverLimitCache(rs, OverLimitOptions{Now: func() int64 { return local }})
	x := []store.Check{{Key: "k", Limit: fw3, Cost: 1}}
	out := make([]algo.Decision, 1)
	for _, at := range []int64{0, 1, 2, 3} { // the 4th is refused at store time 10
		local = t0 + at
		c.Decide(context.Background(), x, 0, out)
	}
	if out[0].Allowed || out[0].RetryAfter != 990 {
		t.Fatalf("4th decision %+v, want refused for 990 ms", out[0])
	}
	// Cached until local 3 + 990 = 993 (the store refuses until local 993 too).
	steps := []struct {
		at        int64
		wantCalls int
		wantRetry int64
	}{{500, 4, 493}, {992, 4, 1}, {993, 5, 0}}
	for _, s := range steps {
		local = t0 + s.at
		if _, err := c.Decide(context.Background(), x, 0, out); err != nil {
			t.Fatal(err)
		}
		if rs.callCount() != s.wantCalls || out[0].RetryAfter != s.wantRetry {
			t.Fatalf("at +%d: store calls %d, decision %+v; want %d calls, RetryAfter %d",
				s.at, rs.callCount(), out[0], s.wantCalls, s.wantRetry)
		}
	}
}

// TestOverLimitFlushAndBound checks Flush and the MaxEntries bound.
func TestOverLimitFlushAndBound(t *testing.T) {
	rs := counting(newRefStore(nil))
	c := NewOverLimitCache(rs, OverLimitOptions{MaxEntries: 1}) // one shard, one entry
	check := func(key string) []store.Check { return []store.Check{{Key: key, Limit: fw3, Cost: 1}} }
	out := make([]algo.Decision, 1)
	for i := range 4 {
		c.Decide(context.Background(), check("a"), t0+int64(i), out)
		c.Decide(context.Background(), check("b"), t0+int64(i), out)
	}
	// a's refusal was evicted by b's: a asks the store, b does not.
	if c.Len() != 1 {
		t.Fatalf("Len = %d, want 1", c.Len())
	}
	calls := rs.callCount()
	c.Decide(context.Background(), check("b"), t0+10, out)
	if rs.callCount() != calls {
		t.Fatalf("b was not answered locally")
	}
	c.Decide(context.Background(), check("a"), t0+10, out)
	if rs.callCount() != calls+1 || c.Len() != 1 {
		t.Fatalf("a: store calls %d, Len %d; want %d, 1", rs.callCount(), c.Len(), calls+1)
	}
	c.Flush()
	if c.Len() != 0 {
		t.Fatalf("Len after Flush = %d", c.Len())
	}
	c.Decide(context.Background(), check("a"), t0+11, out)
	if rs.callCount() != calls+2 {
		t.Fatalf("after Flush a was answered locally")
	}

	big := NewOverLimitCache(rs, OverLimitOptions{MaxEntries: 100})
	for i := range 1000 {
		key := fmt.Sprint("k", i)
		for j := range 4 {
			big.Decide(context.Background(), check(key), t0+int64(j), out)
		}
	}
	if big.Len() != 100 {
		t.Fatalf("Len = %d, want the bound 100", big.Len())
	}
}

// TestOverLimitNoAlloc checks that a local refusal allocates nothing.
func TestOverLimitNoAlloc(t *testing.T) {
	c := NewOverLimitCache(newRefStore(nil), OverLimitOptions{})
	checks := []store.Check{{Key: "{a}:fw", Limit: fw3, Cost: 1}, {Key: "{a}:tb", Limit: tb2, Cost: 1}}
	out := make([]algo.Decision, 2)
	for i := range 4 {
		c.Decide(context.Background(), checks, t0+int64(i), out)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		c.Decide(context.Background(), checks, t0+500, out)
	})
	if allocs != 0 || c.LocalRefusals() < 1000 {
		t.Fatalf("allocs per local refusal = %v (local refusals %d), want 0", allocs, c.LocalRefusals())
	}
}

// TestOverLimitReplay replays the same seeded traffic (several clients,
// routes of several checks) through a store directly and through an
// OverLimitCache in front of a second, identical store, at the same injected
// instants: against refStore (fixed window, token bucket, concurrency) and
// against store/memory with every algorithm. Whether each request is refused
// must be identical; a check the cache refuses must be refused by the store
// too, with the same values when every cost is 1 (RetryAfter a lower bound
// otherwise); and the two stores must end in the same state.
func TestOverLimitReplay(t *testing.T) {
	fw5 := algo.Limit{Kind: algo.FixedWindow, Count: 5, Period: 1000}
	tb := algo.Limit{Kind: algo.TokenBucket, Count: 2, Period: 1000, Burst: 3}
	cc := algo.Limit{Kind: algo.Concurrency, Count: 2, Period: 300}
	sl := algo.Limit{Kind: algo.SlidingLog, Count: 4, Period: 800}
	sw := algo.Limit{Kind: algo.SlidingWindow, Count: 3, Period: 1000}
	lbDelay := algo.Limit{Kind: algo.LeakyBucket, Count: 3, Period: 1000, Burst: 2, Delay: 1}
	lbNoDelay := algo.Limit{Kind: algo.LeakyBucket, Count: 1, Period: 500, Burst: 1, NoDelay: true}
	ref := [][]store.Check{
		{{Key: "fw", Limit: fw5}, {Key: "tb", Limit: tb}},
		{{Key: "tb", Limit: tb}},
		{{Key: "fw", Limit: fw5}, {Key: "cc", Limit: cc}},
	}
	all := append(ref,
		[]store.Check{{Key: "sl", Limit: sl}, {Key: "sw", Limit: sw}},
		[]store.Check{{Key: "sw", Limit: sw}},
		[]store.Check{{Key: "lb", Limit: lbDelay}, {Key: "cc", Limit: cc}},
		[]store.Check{{Key: "lbn", Limit: lbNoDelay}, {Key: "sl", Limit: sl}},
		[]store.Check{{Key: "lb", Limit: lbDelay}, {Key: "fw", Limit: fw5}, {Key: "lbn", Limit: lbNoDelay}},
	)
	stores := []struct {
		name   string
		routes [][]store.Check
		new    func(t *testing.T) store.Store
	}{
		{"ref", ref, func(*testing.T) store.Store { return newRefStore(nil) }},
		{"memory", all, func(t *testing.T) store.Store {
			s := memory.New(memory.Options{SweepInterval: -1})
			t.Cleanup(func() { s.Close() })
			return s
		}},
	}
	for _, st := range stores {
		for _, maxCost := range []int64{1, 2} {
			t.Run(fmt.Sprintf("%s/maxcost%d", st.name, maxCost), func(t *testing.T) {
				direct, behind := counting(st.new(t)), counting(st.new(t))
				replay(t, rand.New(rand.NewPCG(7, uint64(maxCost))), st.routes, direct, behind, maxCost)
			})
		}
	}
}

func replay(t *testing.T, rng *rand.Rand, routes [][]store.Check, direct, behind *countingStore, maxCost int64) {
	const clients = 6
	c := NewOverLimitCache(behind, OverLimitOptions{MaxEntries: 1024}) // no eviction: deterministic
	ctx := context.Background()
	now := t0
	refused, localRefused := 0, 0
	localByKind := map[algo.Kind]int{}
	const n = 5000
	for i := range n {
		now += rng.Int64N(40)
		client := rng.IntN(clients)
		route := rng.IntN(len(routes))
		cost := 1 + rng.Int64N(maxCost)
		checks := make([]store.Check, len(routes[route]))
		for j, ch := range routes[route] {
			ch.Key = fmt.Sprintf("{c%d}:%s", client, ch.Key)
			ch.Cost = cost
			if ch.Limit.Kind == algo.Concurrency {
				ch.Lease = fmt.Sprint("r", i)
			}
			checks[j] = ch
		}
		want := make([]algo.Decision, len(checks))
		got := make([]algo.Decision, len(checks))
		if _, err := direct.Decide(ctx, checks, now, want); err != nil {
			t.Fatal(err)
		}
		before := c.LocalRefusals()
		if _, err := c.Decide(ctx, checks, now, got); err != nil {
			t.Fatal(err)
		}
		local := c.LocalRefusals() != before
		if allAllowed(want) != allAllowed(got) {
			t.Fatalf("request %d at +%d %v: direct %+v, cached %+v (local %v)", i, now-t0, checks, want, got, local)
		}
		if !allAllowed(want) {
			refused++
		}
		if local {
			localRefused++
			for j := range got {
				if got[j].Allowed {
					continue // a sibling's header values are approximate
				}
				localByKind[checks[j].Limit.Kind]++
				if want[j].Allowed || got[j].RetryAfter > want[j].RetryAfter ||
					(maxCost == 1 && got[j] != want[j]) {
					t.Fatalf("request %d at +%d check %s %+v: local %+v, store %+v", i, now-t0, checks[j].Key, checks[j].Limit, got[j], want[j])
				}
			}
		}
		if allAllowed(want) && rng.IntN(2) == 0 { // half the requests end at once
			direct.Release(ctx, checks)
			c.Release(ctx, checks)
		}
	}
	// Same final state: peek every key at one instant.
	for client := range clients {
		for _, r := range routes {
			for _, ch := range r {
				ch.Key = fmt.Sprintf("{c%d}:%s", client, ch.Key)
				ch.Lease = "peek"
				want, got := make([]algo.Decision, 1), make([]algo.Decision, 1)
				direct.Decide(ctx, []store.Check{ch}, now, want)
				behind.Decide(ctx, []store.Check{ch}, now, got)
				if want[0] != got[0] {
					t.Fatalf("final state of %s: direct %+v, behind the cache %+v", ch.Key, want[0], got[0])
				}
			}
		}
	}
	saved := direct.callCount() - behind.callCount()
	if saved != localRefused || uint64(saved) != c.LocalRefusals() || saved < refused/5 {
		t.Fatalf("saved %d store calls, %d local refusals, of %d refused", saved, localRefused, refused)
	}
	t.Logf("%d requests, %d refused, %d answered by the cache (store calls saved); local refusals by check: %v",
		n, refused, saved, localByKind)
	for _, r := range routes {
		for _, ch := range r {
			if k := ch.Limit.Kind; k != algo.Concurrency && localByKind[k] == 0 {
				t.Fatalf("no %s check was refused locally: the traffic does not exercise it", k)
			}
		}
	}
}

func allAllowed(ds []algo.Decision) bool {
	for _, d := range ds {
		if !d.Allowed {
			return false
		}
	}
	return true
}

// TestOverLimitConcurrent runs decisions, records and Flush from several
// goroutines at once (for -race) and checks the accounting.
func TestOverLimitConcurrent(t *testing.T) {
	var mu sync.Mutex
	now := t0
	rs := counting(newRefStore(func() int64 { mu.Lock(); defer mu.Unlock(); now++; return now }))
	c := NewOverLimitCache(rs, OverLimitOptions{MaxEntries: 32, Now: func() int64 { mu.Lock(); defer mu.Unlock(); return now }})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			out := make([]algo.Decision, 2)
			for i := range 2000 {
				k := fmt.Sprint("{c", (g+i)%40, "}")
				checks := []store.Check{{Key: k + ":fw", Limit: fw3, Cost: 1}, {Key: k + ":tb", Limit: tb2, Cost: 1}}
				c.Decide(context.Background(), checks, 0, out)
				if i%500 == 0 {
					c.Flush()
				}
			}
		})
	}
	wg.Wait()
	if got := uint64(rs.callCount()) + c.LocalRefusals(); got != 16000 || c.Len() > 32 {
		t.Fatalf("store calls + local refusals = %d, want 16000; Len %d (bound 32)", got, c.Len())
	}
}

// BenchmarkOverLimitHit measures a local refusal of a two-check decision.
func BenchmarkOverLimitHit(b *testing.B) {
	c := NewOverLimitCache(newRefStore(nil), OverLimitOptions{})
	checks := []store.Check{{Key: "{a}:fw", Limit: fw3, Cost: 1}, {Key: "{a}:tb", Limit: tb2, Cost: 1}}
	out := make([]algo.Decision, 2)
	for i := range 4 {
		c.Decide(context.Background(), checks, t0+int64(i), out)
	}
	b.ReportAllocs()
	for b.Loop() {
		c.Decide(context.Background(), checks, t0+500, out)
	}
}
