package valkey

import (
	"context"
	"fmt"
	"sync"
	"testing"

	valkeygo "github.com/valkey-io/valkey-go"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/testutil/rediscluster"
	"rlproxy/internal/testutil/redisserver"
)

// clusterLimits are the policies of the cluster tests: per client, an
// IP-keyed fixed window and sliding window (one slot) and an API-key-keyed
// token bucket, sliding log and leaky bucket (another slot). Periods are
// long (the buckets drain in 10 s or more) because the server expires
// keys in real time while the tests decide at injected instants: a bucket
// that drained in 1 s lost its state between two rounds of a client on a
// loaded host, and the Go model, which keeps it, disagreed.
var clusterLimits = []struct {
	src   string
	limit algo.Limit
}{
	{"ip", algo.Limit{Kind: algo.FixedWindow, Count: 5, Period: 600_000}},
	{"ip", algo.Limit{Kind: algo.SlidingWindow, Count: 6, Period: 100_000}},
	{"h", algo.Limit{Kind: algo.TokenBucket, Count: 1, Period: 10_000, Burst: 3}},
	{"h", algo.Limit{Kind: algo.SlidingLog, Count: 4, Period: 50_000}},
	{"h", algo.Limit{Kind: algo.LeakyBucket, Count: 2, Period: 10_000, Burst: 2, NoDelay: true}},
}

// clusterChecks returns client i's checks: keys in two hash slots (unless
// the two tags happen to share one).
func clusterChecks(i int) []store.Check {
	cks := make([]store.Check, len(clusterLimits))
	for j, p := range clusterLimits {
		cks[j] = store.Check{Key: fmt.Sprintf("rl:v2:{%s:%d}:p%d", p.src, i, j), Limit: p.limit, Cost: 1}
	}
	return cks
}

// TestClusterMatchesSingleNode: 1,000 clients whose routes span two hash
// slots decide identically (every field, injected now) on a 3-master
// cluster, on a single node and in the Go model (charge all or none), with
// no CROSSSLOT or other error.
func TestClusterMatchesSingleNode(t *testing.T) {
	cl := rediscluster.Start(t, 3)
	single := redisserver.Start(t)
	cs, ss := openStore(t, cl.Addrs), openStore(t, []string{single.Addr})
	c, err := cs.Client(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode() != valkeygo.ClientModeCluster {
		t.Fatalf("client mode %v, want cluster", c.Mode())
	}
	const clients, rounds, workers = 1000, 8, 16
	split := 0
	for i := range clients {
		if len(slotGroups(clusterChecks(i))) > 1 {
			split++
		}
	}
	if split < clients*9/10 {
		t.Fatalf("only %d of %d clients span several slots", split, clients)
	}
	var mu sync.Mutex
	accepted, refused := 0, 0
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := model{}
			for i := w; i < clients; i += workers {
				for r := range rounds {
					now := base + int64(i) + int64(r)*3000 // 3 s apart per client
					cks := clusterChecks(i)
					got, one, want := make([]algo.Decision, len(cks)), make([]algo.Decision, len(cks)), make([]algo.Decision, len(cks))
					if _, err := cs.Decide(context.Background(), cks, now, got); err != nil {
						errs <- fmt.Errorf("cluster, client %d round %d: %v", i, r, err)
						return
					}
					if _, err := ss.Decide(context.Background(), cks, now, one); err != nil {
						errs <- fmt.Errorf("single node, client %d round %d: %v", i, r, err)
						return
					}
					m.decide(cks, now, want)
					all := true
					for k := range cks {
						if got[k] != one[k] || got[k] != want[k] {
							errs <- fmt.Errorf("client %d round %d check %d (%s): cluster %+v, single %+v, model %+v",
								i, r, k, cks[k].Limit.String(), got[k], one[k], want[k])
							return
						}
						all = all && got[k].Allowed
					}
					mu.Lock()
					if all {
						accepted++
					} else {
						refused++
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Per client: the token bucket (3, 1/s) and leaky bucket (q=3, 2/s) bind.
	t.Logf("%d clients (%d split over slots) x %d rounds: %d accepted, %d refused", clients, split, rounds, accepted, refused)
	if accepted == 0 || refused == 0 {
		t.Fatalf("traffic exercised only one path: %d accepted, %d refused", accepted, refused)
	}
}

// TestRefundUndoesCharge: for every algorithm, a charge at now followed by
// its refund leaves a state that decides exactly like one never charged
// (the model without the charge), at now and later, with traffic before.
func TestRefundUndoesCharge(t *testing.T) {
	st, _ := newStore(t)
	limits := []algo.Limit{
		{Kind: algo.FixedWindow, Count: 5, Period: 10_000},
		{Kind: algo.SlidingLog, Count: 5, Period: 10_000},
		{Kind: algo.SlidingWindow, Count: 5, Period: 10_000},
		{Kind: algo.TokenBucket, Count: 1, Period: 1000, Burst: 5},
		{Kind: algo.LeakyBucket, Count: 1, Period: 1000, Burst: 4, NoDelay: true},
		{Kind: algo.Concurrency, Count: 5, Period: 10_000},
	}
	for i, l := range limits {
		for _, cost := range []int64{1, 2} {
			if l.Kind == algo.Concurrency && cost > 1 {
				continue
			}
			key := fmt.Sprintf("rl:v2:{refund}:%d:%d", i, cost)
			m := model{}
			lease := func(n int) string {
				if l.Kind == algo.Concurrency {
					return fmt.Sprintf("lease-%d", n)
				}
				return ""
			}
			step := func(now, c int64, n int) {
				ck := []store.Check{{Key: key, Limit: l, Cost: c, Lease: lease(n)}}
				got, want := make([]algo.Decision, 1), make([]algo.Decision, 1)
				if _, err := st.Decide(context.Background(), ck, now, got); err != nil {
					t.Fatal(err)
				}
				m.decide(ck, now, want)
				if got[0] != want[0] {
					t.Fatalf("%s cost %d at +%d: valkey %+v, model %+v", l.String(), c, now-base, got[0], want[0])
				}
			}
			step(base, 1, 1) // some earlier traffic
			step(base+700, 1, 2)
			// Charge at +1500 (valkey only), then refund it.
			ck := []store.Check{{Key: key, Limit: l, Cost: cost, Lease: lease(3)}}
			out := make([]algo.Decision, 1)
			if _, err := st.Decide(context.Background(), ck, base+1500, out); err != nil || !out[0].Allowed {
				t.Fatalf("%s: charge: %+v, %v", l.String(), out[0], err)
			}
			if err := st.refund(ck, [][]int{{0}}, base+1500); err != nil {
				t.Fatalf("%s: refund: %v", l.String(), err)
			}
			step(base+1500, 0, 0) // peek
			for n, at := range []int64{1500, 1500, 1600, 2500, 4000, 4000} {
				step(base+at, cost, 10+n)
			}
		}
	}
}

// TestSplitDecisionRace: 200 concurrent requests of one client whose two
// policies lie in different slots (a 1,000-request IP policy and a
// 20-request API-key policy): exactly 20 are accepted, and each key counts
// exactly 20 afterwards — refused requests are charged by none.
func TestSplitDecisionRace(t *testing.T) {
	cl := rediscluster.Start(t, 3)
	st := openStore(t, cl.Addrs)
	big := algo.Limit{Kind: algo.FixedWindow, Count: 1000, Period: 3_600_000}
	small := algo.Limit{Kind: algo.FixedWindow, Count: 20, Period: 3_600_000}
	cks := []store.Check{
		{Key: "rl:v2:{ip:10.0.0.1}:big", Limit: big, Cost: 1},
		{Key: "rl:v2:{h:abc}:small", Limit: small, Cost: 1},
	}
	if len(slotGroups(cks)) != 2 {
		t.Fatal("test keys share a slot")
	}
	now := base + 1000
	var mu sync.Mutex
	accepted := 0
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]algo.Decision, 2)
			if _, err := st.Decide(context.Background(), cks, now, out); err != nil {
				t.Error(err)
				return
			}
			if out[0].Allowed && out[1].Allowed {
				mu.Lock()
				accepted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if accepted != 20 {
		t.Fatalf("accepted %d, want 20", accepted)
	}
	out := make([]algo.Decision, 2)
	peek := []store.Check{{Key: cks[0].Key, Limit: big}, {Key: cks[1].Key, Limit: small}}
	if _, err := st.Decide(context.Background(), peek, now, out); err != nil {
		t.Fatal(err)
	}
	if out[0].Remaining != 1000-20 || out[1].Remaining != 0 {
		t.Fatalf("remaining after the race: big %d (want 980), small %d (want 0)", out[0].Remaining, out[1].Remaining)
	}
}

// TestSlot checks the CRC16 hash slot against the Cluster specification's
// examples and CLUSTER KEYSLOT.
func TestSlot(t *testing.T) {
	if got := Slot("123456789"); got != 0x31C3&16383 {
		t.Fatalf("Slot(123456789) = %d, want %d", got, 0x31C3&16383)
	}
	srv := redisserver.Start(t, "--cluster-enabled", "yes")
	for _, k := range []string{"foo", "rl:v2:{ip:192.0.2.7}:api", "a{}b", "{}{x}", "x{y}z{w}", "{user1000}.following"} {
		want, err := srv.Do(t, "CLUSTER", "KEYSLOT", k).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if got := Slot(k); int64(got) != want {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT %d", k, got, want)
		}
	}
}
