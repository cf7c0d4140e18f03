package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/store/valkey"
	"rlproxy/internal/testutil/fleet"
	"rlproxy/internal/testutil/rediscluster"
)

// TestClusterMasterKilled (issue 21): a 3+3 Redis Cluster on loopback, one
// rlproxy, steady load from 240 clients spread over the three masters'
// slots; one master is killed. Decisions for keys on the two others keep
// succeeding (>= 99 %), breakers open only for the dead master's slots
// (the dead node, and at most its replica while it takes over), its
// keys follow their fail mode (deny: 503) until the replica has taken
// over and then succeed again, and rlproxy_store_fallback_decisions_total
// equals the 503s the clients saw.
func TestClusterMasterKilled(t *testing.T) {
	cl := rediscluster.StartReplicated(t, 3)
	up := newOKUpstream(t)
	f := fleet.Start(t, 1, fmt.Sprintf(`
store: { type: valkey, valkey: { addrs: [%s] } }
real_ip: { header: X-Forwarded-For, trusted_proxies: [127.0.0.1] }
upstreams: { app: { url: %q } }
policies:
  p: { algorithm: fixed_window, limit: 1000000, window: 1h, key: ip, on_store_error: deny }
routes:
  - { name: all, match: { path_prefix: / }, upstream: app, policies: [p] }
`, `"`+strings.Join(cl.Addrs, `", "`)+`"`, up))

	// Each client's master, from the topology rlproxy reads too.
	topo, err := valkey.New(context.Background(), valkey.Options{Addrs: cl.Addrs, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Close()
	if _, err := topo.Client(context.Background()); err != nil {
		t.Fatal(err)
	}
	const clients = 240
	ips := make([]string, clients)
	owner := make([]string, clients)
	for i := range ips {
		ips[i] = fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256+1)
		owner[i] = topo.Node(ipKey(ips[i]))
	}
	dead := owner[0]
	victim := -1
	for i, a := range cl.Addrs {
		if a == dead {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("client 0's master %s is not one of %v", dead, cl.Addrs)
	}

	type tally struct{ ok, unavailable, other atomic.Int64 }
	var live, gone tally // requests of clients on the other masters, on the killed one
	var afterFailover atomic.Bool
	var goneAfter tally
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var next atomic.Int64
	c := &http.Client{Timeout: 10 * time.Second}
	for range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := int(next.Add(1)) % clients
				req, _ := http.NewRequest(http.MethodGet, f.URL(0)+"/x", nil)
				req.Header.Set("X-Forwarded-For", ips[i])
				code := 0
				if resp, err := c.Do(req); err == nil {
					code = resp.StatusCode
					resp.Body.Close()
				}
				tl := &live
				if owner[i] == dead {
					tl = &gone
					if afterFailover.Load() {
						tl = &goneAfter
					}
				}
				switch code {
				case http.StatusOK:
					tl.ok.Add(1)
				case http.StatusServiceUnavailable:
					tl.unavailable.Add(1)
				default:
					tl.other.Add(1)
				}
			}
		})
	}
	time.Sleep(time.Second)
	killed := time.Now()
	cl.Nodes[victim].Stop()
	// Failover: the dead master's slots answer again (from the replica)
	// through rlproxy, for 1 s in a row.
	// Failover takes ~2-4 s (cluster-node-timeout 1 s); allow for a loaded machine.
	for give := time.Now().Add(45 * time.Second); topo.Node(ipKey(ips[0])) == dead; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(give) {
			close(stop)
			wg.Wait()
			nodes, _ := cl.Nodes[(victim+1)%len(cl.Nodes)].Do(t, "CLUSTER", "NODES").ToString()
			t.Fatalf("the replica did not take over the dead master's slots in 45 s; CLUSTER NODES:\n%s", nodes)
		}
	}
	failover := time.Since(killed)
	heir := topo.Node(ipKey(ips[0]))    // the promoted replica
	time.Sleep(1500 * time.Millisecond) // rlproxy reads the topology every second
	afterFailover.Store(true)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	liveN := live.ok.Load() + live.unavailable.Load() + live.other.Load()
	t.Logf("failover after %v; other masters' clients: %d of %d ok; dead master's: %d ok, %d 503, %d other until failover, then %d ok, %d 503, %d other",
		failover.Round(time.Millisecond), live.ok.Load(), liveN, gone.ok.Load(), gone.unavailable.Load(), gone.other.Load(),
		goneAfter.ok.Load(), goneAfter.unavailable.Load(), goneAfter.other.Load())
	if liveN == 0 || float64(live.ok.Load()) < 0.99*float64(liveN) {
		t.Errorf("other masters' clients: %d of %d ok, want >= 99 %%", live.ok.Load(), liveN)
	}
	if gone.other.Load()+live.other.Load()+goneAfter.other.Load() != 0 || gone.unavailable.Load() == 0 {
		t.Errorf("dead master's clients got %d answers other than 200/503 (%d on the others), %d 503s; want 0, some",
			gone.other.Load(), live.other.Load(), gone.unavailable.Load())
	}
	if goneAfter.ok.Load() == 0 || goneAfter.unavailable.Load() != 0 {
		t.Errorf("after failover the dead master's clients got %d ok, %d 503; want all ok", goneAfter.ok.Load(), goneAfter.unavailable.Load())
	}
	closed := scrapeCounter(t, f.AdminURL(0), `rlproxy_store_fallback_decisions_total{mode="closed",policy="p"}`)
	if want := float64(gone.unavailable.Load() + live.unavailable.Load() + goneAfter.unavailable.Load()); closed != want {
		t.Errorf("rlproxy_store_fallback_decisions_total{mode=closed} = %v, clients saw %v 503s", closed, want)
	}
	for _, line := range strings.Split(f.Procs[0].Log(), "\n") {
		// The promoted replica may fail a few round trips while it takes
		// over (its breaker then covers the dead master's slots only).
		if strings.Contains(line, "circuit breaker open") && !strings.Contains(line, "node="+dead) && !strings.Contains(line, "node="+heir) {
			t.Errorf("a breaker opened for a node other than %s (dead) and %s (its replica): %s", dead, heir, line)
		}
	}
	if !strings.Contains(f.Procs[0].Log(), "node="+dead) {
		t.Errorf("the dead node's breaker never opened")
	}
}

// ipKey is the state key of policy p for ip (its hash tag decides the slot).
func ipKey(ip string) string { return "rl:v2:{ip:" + ip + "}:p" }

// newOKUpstream starts an upstream answering 200 "ok" to everything and
// returns its URL.
func newOKUpstream(t *testing.T) string {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(up.Close)
	return up.URL
}

// scrapeCounter reads the value of series (name{labels} as exposed) from
// an instance's /metrics; 0 when absent.
func scrapeCounter(t *testing.T, adminURL, series string) float64 {
	resp, err := http.Get(adminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}
