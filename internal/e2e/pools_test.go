package e2e

// Upstream pools: balancing, health, retries, over real
// loopback upstream servers behind a real rlproxy.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// poolServer is one upstream server of a pool: it answers its name and
// counts what it received, and can be killed and brought back on its port.
type poolServer struct {
	t      *testing.T
	name   string
	addr   string
	hits   atomic.Int64 // data requests served
	posts  atomic.Int64 // POST bodies read to their end
	health atomic.Int64 // health check requests
	mu     sync.Mutex
	srv    *http.Server
	// abortPosts makes it read a POST body and drop the connection unanswered.
	abortPosts atomic.Bool
}

func newPoolServer(t *testing.T, name string) *poolServer {
	ps := &poolServer{t: t, name: name}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ps.addr = ln.Addr().String()
	ps.serve(ln)
	t.Cleanup(ps.kill)
	return ps
}

func (ps *poolServer) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(ps.handle)}
	ps.mu.Lock()
	ps.srv = srv
	ps.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

func (ps *poolServer) handle(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" {
		ps.health.Add(1)
		return
	}
	if r.Method == http.MethodPost {
		if _, err := io.Copy(io.Discard, r.Body); err == nil {
			ps.posts.Add(1)
		}
		if ps.abortPosts.Load() {
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
	}
	ps.hits.Add(1)
	io.WriteString(w, ps.name)
}

// kill closes the listener and every connection at once, as a crashed
// process leaves them (new connections are refused).
func (ps *poolServer) kill() {
	ps.mu.Lock()
	srv := ps.srv
	ps.srv = nil
	ps.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// restart listens on the same port again.
func (ps *poolServer) restart() {
	ln, err := net.Listen("tcp", ps.addr)
	if err != nil {
		ps.t.Fatalf("restarting %s on %s: %v", ps.name, ps.addr, err)
	}
	ps.serve(ln)
}

func (ps *poolServer) url() string { return "http://" + ps.addr }

// poolClient is a client with enough idle connections for the tests' load.
func poolClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 100}}
}

// poolGet sends one GET; it returns the status (0 on a transport error) and
// the body, with streamErr set when the body broke after the header.
func poolGet(c *http.Client, url string, header ...string) (code int, body string, streamErr error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// poolRun sends n GETs from `workers` goroutines and tallies the bodies of
// the 200 answers.
func poolRun(t *testing.T, url string, n, workers int) map[string]int {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	var next atomic.Int64
	var wg sync.WaitGroup
	c := poolClient()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				code, body, _ := poolGet(c, url)
				mu.Lock()
				if code == 200 {
					counts[body]++
				} else {
					counts[fmt.Sprint(code)]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return counts
}

// TestPoolWeights: weights 3:1 over 800 requests → 600 and 200 (± 1 %).
// (Equal weights over 3 processes: TestPoolUpstreamProcesses.)
func TestPoolWeights(t *testing.T) {
	a, b := newPoolServer(t, "a"), newPoolServer(t, "b")
	in := rlproxytest.Start(t, fmt.Sprintf(`upstreams:
  weighted: { urls: [{ url: %q, weight: 3 }, %q] }
routes: [{ name: w, upstream: weighted }]
`, a.url(), b.url()))
	got := poolRun(t, in.URL+"/w", 800, 16)
	if got["a"] < 594 || got["a"] > 606 || got["a"]+got["b"] != 800 {
		t.Errorf("weights 3:1 over 800: %v, want a 600 ± 1 %%, b the rest", got)
	}
	t.Logf("weights 3:1 over 800: %v", got)
}

// TestPoolClientHash: each client stays on one server; removing a server
// by reload moves only that server's clients.
func TestPoolClientHash(t *testing.T) {
	a, b, c := newPoolServer(t, "a"), newPoolServer(t, "b"), newPoolServer(t, "c")
	cfg := `upstreams:
  app: { urls: [%s], balance: client_hash, hash_key: header:X-Client }
routes: [{ name: r, upstream: app }]
`
	in := rlproxytest.Start(t, fmt.Sprintf(cfg, fmt.Sprintf("%q, %q, %q", a.url(), b.url(), c.url())))
	hc := poolClient()
	const clients = 300
	where := func() map[string]string {
		m := map[string]string{}
		for i := range clients {
			id := fmt.Sprint("client-", i)
			for range 3 {
				code, body, _ := poolGet(hc, in.URL+"/", "X-Client", id)
				if code != 200 {
					t.Fatalf("client %s: %d", id, code)
				}
				if prev := m[id]; prev != "" && prev != body {
					t.Fatalf("client %s moved from %s to %s with the pool unchanged", id, prev, body)
				}
				m[id] = body
			}
		}
		return m
	}
	before := where()
	share := map[string]int{}
	for _, s := range before {
		share[s]++
	}
	for _, s := range []string{"a", "b", "c"} {
		if share[s] < clients/6 {
			t.Errorf("server %s has %d of %d clients: the ring is lopsided (%v)", s, share[s], clients, share)
		}
	}
	in.Rewrite(t, "listen: \"127.0.0.1:0\"\nadmin_listen: \"127.0.0.1:0\"\n"+
		fmt.Sprintf(cfg, fmt.Sprintf("%q, %q", a.url(), b.url())))
	in.App.Reload("test")
	after := where()
	moved := 0
	for id, s := range before {
		switch {
		case s != "c" && after[id] != s:
			t.Errorf("client %s moved from %s to %s though its server stayed", id, s, after[id])
		case s == "c":
			moved++
		}
	}
	t.Logf("client_hash: shares %v; removing c moved %d of %d clients (only c's)", share, moved, clients)
}

// poolLoad runs 50 clients of short GETs until stop is closed, counting
// failed answers (status ≠ 200 or no answer) and bodies that broke after
// the header (streaming when a server died).
type poolLoad struct {
	ok, failed, streaming atomic.Int64
}

// answered is how many requests of the load have been answered so far.
func (l *poolLoad) answered() int64 { return l.ok.Load() + l.failed.Load() + l.streaming.Load() }

// poolKillUnderLoad waits until the load has had n answers, runs kill, and
// stops the load once n more were answered: traffic before and after the
// death, by count rather than by a guessed duration.
func poolKillUnderLoad(t *testing.T, url string, n int64, kill func()) *poolLoad {
	t.Helper()
	stop := make(chan struct{})
	load, wg := runPoolLoad(url, 50, stop)
	waitfor.True(t, "load before the kill", func() bool { return load.answered() >= n })
	kill()
	after := load.answered() + n
	waitfor.True(t, "load after the kill", func() bool { return load.answered() >= after })
	close(stop)
	wg.Wait()
	return load
}

func runPoolLoad(url string, clients int, stop <-chan struct{}) (*poolLoad, *sync.WaitGroup) {
	l := &poolLoad{}
	var wg sync.WaitGroup
	c := poolClient()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, _, serr := poolGet(c, url)
				switch {
				case serr != nil:
					l.streaming.Add(1)
				case code == 200:
					l.ok.Add(1)
				default:
					l.failed.Add(1)
				}
			}
		}()
	}
	return l, &wg
}

// TestPoolKillServerNoRetries: one of three servers dies under 50
// concurrent clients with retries: 0: the requests in flight on it fail,
// then failures stop once max_fails took it out. (With retries:
// TestPoolUpstreamProcesses.)
func TestPoolKillServerNoRetries(t *testing.T) {
	a, b, c := newPoolServer(t, "a"), newPoolServer(t, "b"), newPoolServer(t, "c")
	in := rlproxytest.Start(t, fmt.Sprintf(`upstreams:
  app: { urls: [%q, %q, %q], max_fails: 3, fail_timeout: 30s, retries: 0 }
routes: [{ name: r, upstream: app }]
`, a.url(), b.url(), c.url()))
	load := poolKillUnderLoad(t, in.URL+"/", 500, c.kill)
	failed := load.failed.Load()
	t.Logf("retries 0: %d ok, %d failed, %d broken while streaming; c served %d before dying",
		load.ok.Load(), failed, load.streaming.Load(), c.hits.Load())
	// In flight on c when it died (at most 50), then max_fails new ones at most.
	if failed > 50+3 {
		t.Errorf("%d failures, want at most the in-flight ones + max_fails", failed)
	}
	// Out of rotation for fail_timeout now: no further failure.
	if got := poolRun(t, in.URL+"/", 200, 4); got["a"]+got["b"] != 200 {
		t.Errorf("after max_fails: %v, want 200 answered by a and b", got)
	}
}

// TestPoolActiveHealthCheck: the checker takes a dead server out within
// interval × fails + 1 s and puts it back within interval × passes + 1 s of
// its return; rlproxy_upstream_server_up follows.
func TestPoolActiveHealthCheck(t *testing.T) {
	a, b := newPoolServer(t, "a"), newPoolServer(t, "b")
	in := rlproxytest.Start(t, fmt.Sprintf(`upstreams:
  app:
    urls: [%q, %q]
    max_fails: 0
    health_check: { path: /health, interval: 200ms, timeout: 100ms, fails: 2, passes: 3 }
routes: [{ name: r, upstream: app }]
`, a.url(), b.url()))
	up := func() float64 {
		_, samples := opsScrape(t, in)
		return opsValue(t, samples, "rlproxy_upstream_server_up", "upstream", "app", "server", b.addr)
	}
	waitUp := func(want float64, within time.Duration) time.Duration {
		return waitfor.Within(t, within, fmt.Sprintf("rlproxy_upstream_server_up{server=%q} = %v", b.addr, want), func() bool { return up() == want })
	}
	waitUp(1, time.Second)
	b.kill()
	down := waitUp(0, 2*200*time.Millisecond+time.Second)
	hitsA := a.hits.Load()
	got := poolRun(t, in.URL+"/", 20, 2)
	if got["a"] != 20 {
		t.Errorf("with b down: %v, want all 20 on a", got)
	}
	b.restart()
	back := waitUp(1, 3*200*time.Millisecond+time.Second)
	t.Logf("health check: down after %v (bound 1.4s), up after %v of its return (bound 1.6s); a served %d", down, back, a.hits.Load()-hitsA)
	if b.health.Load() < 3 {
		t.Errorf("b saw %d health checks after its return, want ≥ passes (3)", b.health.Load())
	}
}

// TestPoolPostNeverSentTwice: a POST whose body reached a server that then
// dropped the connection is not retried (502, one body received); a POST
// refused at connect is retried on the next server (200, one body).
func TestPoolPostNeverSentTwice(t *testing.T) {
	a, b := newPoolServer(t, "a"), newPoolServer(t, "b")
	a.abortPosts.Store(true)
	b.abortPosts.Store(true)
	in := rlproxytest.Start(t, fmt.Sprintf(`upstreams:
  app: { urls: [%q, %q], max_fails: 0, retries: 1 }
routes: [{ name: r, upstream: app }]
`, a.url(), b.url()))
	post := func() int {
		resp, err := poolClient().Post(in.URL+"/", "text/plain", strings.NewReader(strings.Repeat("x", 10000)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 4 {
		if code := post(); code != http.StatusBadGateway {
			t.Errorf("POST %d to a server that drops it: %d, want 502", i, code)
		}
	}
	if n := a.posts.Load() + b.posts.Load(); n != 4 {
		t.Errorf("4 POSTs: the upstreams read %d bodies, want 4 (never sent twice)", n)
	}
	a.kill() // refused at connect: nothing sent, so the next server gets it
	b.abortPosts.Store(false)
	before := b.posts.Load()
	for i := range 4 {
		if code := post(); code != 200 {
			t.Errorf("POST %d with a refused: %d, want 200 from b", i, code)
		}
	}
	if n := b.posts.Load() - before; n != 4 {
		t.Errorf("b read %d bodies of 4 POSTs, want 4", n)
	}
}

// TestPoolChargedOnce: on a limited route whose pool has a dead server,
// a retried request is charged once: a quota of 6 admits exactly 6.
func TestPoolChargedOnce(t *testing.T) {
	a := newPoolServer(t, "a")
	dead := newPoolServer(t, "dead")
	dead.kill()
	in := rlproxytest.Start(t, fmt.Sprintf(`upstreams:
  app: { urls: [%q, %q], max_fails: 0 }
policies:
  q: { algorithm: sliding_log, limit: 6, window: 1h }
routes: [{ name: r, upstream: app, policies: [q] }]
`, dead.url(), a.url()))
	c := poolClient()
	codes := map[int]int{}
	for range 10 {
		code, _, _ := poolGet(c, in.URL+"/")
		codes[code]++
	}
	if codes[200] != 6 || codes[429] != 4 {
		t.Errorf("10 requests on a quota of 6 with retries: %v, want 6 × 200 and 4 × 429", codes)
	}
	_, samples := opsScrape(t, in)
	if r := opsValue(t, samples, "rlproxy_upstream_retries_total", "upstream", "app"); r < 1 {
		t.Errorf("rlproxy_upstream_retries_total = %v, want ≥ 1 (half the requests tried the dead server first)", r)
	}
	if n := opsValue(t, samples, "rlproxy_requests_total", "route", "r", "policy", "q", "decision", "allowed"); n != 6 {
		t.Errorf("rlproxy_requests_total allowed = %v, want 6", n)
	}
}
