package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/store/valkey"
	"rlproxy/internal/testutil/fleet"
	"rlproxy/internal/testutil/promrules"
	"rlproxy/internal/testutil/rediscluster"
	"rlproxy/internal/testutil/waitfor"
)

// TestClusterMasterKilled: a 3+3 Redis Cluster on loopback, one rlproxy,
// steady load from 240 clients spread over the three masters' slots; one
// master is SIGKILLed. Decisions for keys on the two others keep
// succeeding (>= 99 %); the dead master's keys follow their fail mode
// (deny: 503) until its replica has taken over, and once the new owner
// has answered one of them none fails again (measured by the clients);
// rlproxy_breaker_open returns to 0 within 5 s of the replica owning the
// slots and stays 0, the dead node's rlproxy_store_node_up series is
// gone, the promoted replica's breaker never opens, and
// rlproxy_store_fallback_decisions_total equals the 503s the clients saw.
// The shipped RlproxyBreakerOpen alert, fed the scraped series, fires
// during the outage and is resolved after it. RLPROXY_FAILOVER_RUNS=N
// repeats it N times (scripts/failover-runs.sh: 5).
func TestClusterMasterKilled(t *testing.T) {
	runs := 1
	if n, err := strconv.Atoi(os.Getenv("RLPROXY_FAILOVER_RUNS")); err == nil && n > 1 {
		runs = n
	}
	for i := range runs {
		t.Run(fmt.Sprint("run", i+1), clusterMasterKilled)
	}
}

// clusterTally counts the answers of one group of clients.
type clusterTally struct{ ok, unavailable, other atomic.Int64 }

func (tl *clusterTally) add(code int) {
	switch code {
	case http.StatusOK:
		tl.ok.Add(1)
	case http.StatusServiceUnavailable:
		tl.unavailable.Add(1)
	default:
		tl.other.Add(1)
	}
}

func clusterMasterKilled(t *testing.T) {
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

	var live, gone, goneAfter clusterTally // other masters' clients; the dead one's before and after the new owner answered
	// takenOver: when the replica owned the slots (UnixNano, 0 before);
	// answered: when the first request of a dead-master client sent after
	// that was answered 200 (the new owner answers).
	var takenOver, answered atomic.Int64
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
				sent := time.Now().UnixNano()
				code := 0
				if resp, err := c.Do(req); err == nil {
					code = resp.StatusCode
					resp.Body.Close()
				}
				switch {
				case owner[i] != dead:
					live.add(code)
				case answered.Load() != 0 && sent > answered.Load():
					goneAfter.add(code)
				default:
					gone.add(code)
					if to := takenOver.Load(); code == http.StatusOK && to != 0 && sent > to {
						answered.CompareAndSwap(0, time.Now().UnixNano())
					}
				}
			}
		})
	}
	rec := promrules.NewRecording("rlproxy_breaker_open")
	metrics := f.AdminURL(0) + "/metrics"
	// The load is under way before the kill: as many 200s as clients (the
	// workers take the clients in turn, so every master has served keys).
	waitfor.True(t, "as many 200s as clients before the kill", func() bool {
		return live.ok.Load()+gone.ok.Load() >= clients
	})
	for range 2 {
		rec.Scrape(t, metrics)
		time.Sleep(alertStep)
	}
	killed := time.Now()
	cl.Nodes[victim].Stop() // SIGKILL
	// Failover: the replica owns the dead master's slots (~2-4 s with
	// cluster-node-timeout 1 s; allow for a loaded machine). One scrape
	// per alertStep meanwhile.
	for give := time.Now().Add(45 * time.Second); topo.Node(ipKey(ips[0])) == dead; {
		if time.Now().After(give) {
			close(stop)
			wg.Wait()
			nodes, _ := cl.Nodes[(victim+1)%len(cl.Nodes)].Do(t, "CLUSTER", "NODES").ToString()
			t.Fatalf("the replica did not take over the dead master's slots in 45 s; CLUSTER NODES:\n%s", nodes)
		}
		rec.Scrape(t, metrics)
		time.Sleep(clusterStep)
	}
	takenOver.Store(time.Now().UnixNano())
	failover := time.Since(killed)
	outage := rec.Steps() - 1 // the last scrape before the takeover
	heir := topo.Node(ipKey(ips[0]))
	closedIn := clusterBreakerCloses(t, metrics, 5*time.Second)
	// Stays closed: 12 more scrapes (3 s), all 0.
	after := rec.Steps()
	for range 12 {
		time.Sleep(clusterStep)
		rec.Scrape(t, metrics)
		if v := scrapeCounter(t, f.AdminURL(0), "rlproxy_breaker_open"); v != 0 {
			t.Errorf("rlproxy_breaker_open = %v %v after the takeover, want 0 once closed", v, time.Since(killed)-failover)
		}
	}
	close(stop)
	wg.Wait()

	liveN := live.ok.Load() + live.unavailable.Load() + live.other.Load()
	t.Logf("failover after %v, breaker closed %v after it; other masters' clients: %d of %d ok; dead master's: %d ok, %d 503, %d other until the new owner answered, then %d ok, %d 503, %d other",
		failover.Round(time.Millisecond), closedIn.Round(time.Millisecond), live.ok.Load(), liveN, gone.ok.Load(), gone.unavailable.Load(), gone.other.Load(),
		goneAfter.ok.Load(), goneAfter.unavailable.Load(), goneAfter.other.Load())
	if liveN == 0 || float64(live.ok.Load()) < 0.99*float64(liveN) {
		t.Errorf("other masters' clients: %d of %d ok, want >= 99 %%", live.ok.Load(), liveN)
	}
	if gone.other.Load()+live.other.Load()+goneAfter.other.Load() != 0 || gone.unavailable.Load() == 0 {
		t.Errorf("dead master's clients got %d answers other than 200/503 (%d on the others), %d 503s; want 0, some",
			gone.other.Load(), live.other.Load(), gone.unavailable.Load())
	}
	if goneAfter.ok.Load() == 0 || goneAfter.unavailable.Load() != 0 {
		t.Errorf("after the new owner answered, the dead master's clients got %d ok, %d 503; want all ok", goneAfter.ok.Load(), goneAfter.unavailable.Load())
	}
	closed := scrapeCounter(t, f.AdminURL(0), `rlproxy_store_fallback_decisions_total{mode="closed",policy="p"}`)
	if want := float64(gone.unavailable.Load() + live.unavailable.Load() + goneAfter.unavailable.Load()); closed != want {
		t.Errorf("rlproxy_store_fallback_decisions_total{mode=closed} = %v, clients saw %v 503s", closed, want)
	}
	if v := scrapeCounter(t, f.AdminURL(0), `rlproxy_store_node_up{node="`+dead+`"}`); v != 0 || clusterHasSeries(t, metrics, `rlproxy_store_node_up{node="`+dead+`"}`) {
		t.Errorf("rlproxy_store_node_up{node=%q} still exposed after the node left the topology", dead)
	}
	log := f.Procs[0].Log()
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "circuit breaker open") && !strings.Contains(line, "node="+dead) {
			t.Errorf("a breaker opened for a node other than %s (dead; %s is its promoted replica): %s", dead, heir, line)
		}
	}
	if !strings.Contains(log, "node="+dead) {
		t.Errorf("the dead node's breaker never opened")
	}
	// Firing during the outage: at the last scrape with the breaker open
	// (for: 2m is 3 scrapes), which the outage must reach.
	open := rec.Values(`rlproxy_breaker_open{job="rlproxy",instance="test"}`)
	last := outage
	for last >= 0 && open[last] != "1" {
		last--
	}
	run := 0
	for i := last; i >= 0 && open[i] == "1"; i-- {
		run++
	}
	if run < 3 {
		t.Fatalf("rlproxy_breaker_open was 1 in %d scrapes of the outage (%v), want >= 3 to judge the alert", run, open)
	}
	rec.Check(t, alertRules, "RlproxyBreakerOpen", map[int]bool{1: false, last: true, after + 11: false})
}

// clusterStep is the time between two scrapes (promtool minutes) of the
// failover: the outage lasts 1-4 s.
const clusterStep = 100 * time.Millisecond

// clusterBreakerCloses waits (up to within) for the instance's
// rlproxy_breaker_open to read 0 and returns how long that took.
func clusterBreakerCloses(t *testing.T, metrics string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if !waitfor.Poll(within, func() bool { return clusterHasSeries(t, metrics, "rlproxy_breaker_open 0") }) {
		t.Errorf("rlproxy_breaker_open still 1 %v after the replica owned the slots, want 0 within %v", time.Since(start).Round(time.Millisecond), within)
	}
	return time.Since(start)
}

// clusterHasSeries reports whether metrics (a /metrics URL) has a line
// starting with series.
func clusterHasSeries(t *testing.T, metrics, series string) bool {
	t.Helper()
	resp, err := http.Get(metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, series) {
			return true
		}
	}
	return false
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
