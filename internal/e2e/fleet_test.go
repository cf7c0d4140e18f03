package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/testutil/fleet"
	"rlproxy/internal/testutil/rediscluster"
	"rlproxy/internal/testutil/redisserver"
	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// fleetSpread sends n requests to path, spread round-robin over urls by
// `workers` concurrent senders, and returns the count of each status
// (transport errors count as status 0).
func fleetSpread(t *testing.T, c *http.Client, urls []string, path string, n, workers int, hdr ...string) map[int]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				code := 0
				req, _ := http.NewRequest(http.MethodGet, urls[i%len(urls)]+path, nil)
				for k := 0; k+1 < len(hdr); k += 2 {
					req.Header.Set(hdr[k], hdr[k+1])
				}
				if resp, err := c.Do(req); err == nil {
					code = resp.StatusCode
					resp.Body.Close()
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return codes
}

// TestFleetSharedQuota: three rlproxy processes sharing one Valkey, one
// client's 100 requests spread round-robin over them: exactly the quota
// (10) passes for every algorithm; for concurrency (10 in flight, slow
// upstream) exactly 10 of 100 simultaneous requests pass.
func TestFleetSharedQuota(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	up := rlproxytest.NewUpstream(t)
	release := make(chan struct{}) // closed once every concurrency request is decided
	up.Handler = func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/cc") {
			<-release
		}
		_, _ = w.Write([]byte("ok"))
	}
	f := fleet.Start(t, 3, fmt.Sprintf(`
store: { type: valkey, valkey: { addrs: [%q], timeout: 2s } }
upstreams: { app: { url: %q } }
policies:
  fw: { algorithm: fixed_window, limit: 10, window: 1h, on_store_error: deny }
  sl: { algorithm: sliding_log, limit: 10, window: 1h, on_store_error: deny }
  sw: { algorithm: sliding_window, limit: 10, window: 1h, on_store_error: deny }
  tb: { algorithm: token_bucket, rate: 10r/h, burst: 10, on_store_error: deny }
  lb: { algorithm: leaky_bucket, rate: 10r/h, burst: 9, nodelay: true, on_store_error: deny }
  cc: { algorithm: concurrency, limit: 10, on_store_error: deny }
routes:
  - { name: fw, match: { path_prefix: /fw }, upstream: app, policies: [fw] }
  - { name: sl, match: { path_prefix: /sl }, upstream: app, policies: [sl] }
  - { name: sw, match: { path_prefix: /sw }, upstream: app, policies: [sw] }
  - { name: tb, match: { path_prefix: /tb }, upstream: app, policies: [tb] }
  - { name: lb, match: { path_prefix: /lb }, upstream: app, policies: [lb] }
  - { name: cc, match: { path_prefix: /cc }, upstream: app, policies: [cc] }
`, srv.Addr, up.URL))
	urls := []string{f.URL(0), f.URL(1), f.URL(2)}
	c := rlproxytest.ClientFrom("127.0.0.21")
	// A fixed window of 1 h must not roll over during the run.
	e2eAwayFromBoundary(t, time.Hour, 30*time.Second)
	for _, alg := range []string{"fw", "sl", "sw", "tb", "lb"} {
		codes := fleetSpread(t, c, urls, "/"+alg, 100, 8)
		if codes[200] != 10 || codes[429] != 90 || len(codes) != 2 {
			t.Errorf("%s: statuses %v, want exactly 10×200 and 90×429", alg, codes)
		}
	}
	// Every concurrency request is held at the upstream until all 100 are
	// decided (counted by the three instances), so all overlap.
	spread := make(chan map[int]int)
	go func() { spread <- fleetSpread(t, c, urls, "/cc", 100, 100) }()
	waitfor.True(t, "all 100 concurrency requests decided", func() bool {
		n := 0.0
		for i := range urls {
			n += fleetDecided(t, f.AdminURL(i), "cc")
		}
		return n == 100
	})
	close(release)
	codes := <-spread
	if codes[200] != 10 || codes[429] != 90 || len(codes) != 2 {
		t.Errorf("concurrency: statuses %v, want exactly 10×200 and 90×429", codes)
	}
}

// TestFleetKillAndStop: a SIGKILLed instance drops out while the others keep
// the shared count (the quota is not reset by a crash); SIGTERM exits 0.
func TestFleetKillAndStop(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	f := fleet.Start(t, 3, fmt.Sprintf(`
store: { type: valkey, valkey: { addrs: [%q], timeout: 2s } }
upstreams: { echo: { builtin: echo } }
policies:
  fw: { algorithm: fixed_window, limit: 10, window: 1h, on_store_error: deny }
routes:
  - { name: fw, upstream: echo, policies: [fw] }
`, srv.Addr))
	e2eAwayFromBoundary(t, time.Hour, 30*time.Second)
	c := rlproxytest.ClientFrom("127.0.0.22")
	first := fleetSpread(t, c, []string{f.URL(0), f.URL(1), f.URL(2)}, "/a", 6, 1)
	f.Kill(1)
	if exited, code := f.Procs[1].Exited(); !exited || code != -1 {
		t.Fatalf("after Kill: exited %v code %d, want killed", exited, code)
	}
	second := fleetSpread(t, c, []string{f.URL(0), f.URL(2)}, "/a", 10, 1)
	if first[200] != 6 || second[200] != 4 || second[429] != 6 {
		t.Fatalf("before kill %v, after %v: want 6×200, then 4×200 + 6×429", first, second)
	}
	if !f.Stop(0, 10*time.Second) {
		t.Fatal("SIGTERM: no exit within 10 s")
	}
	if _, code := f.Procs[0].Exited(); code != 0 {
		t.Fatalf("SIGTERM: exit code %d, want 0", code)
	}
}

// TestFleetClusterProxy: two rlproxy processes on a 3-master cluster, 300
// distinct clients (X-Forwarded-For from a trusted proxy) each with its own
// API key, on a route whose two policies key by header and by IP (two hash
// slots). Fail-closed policies turn any CROSSSLOT or script error into a
// 503; every client gets exactly 2×200 then 1×429.
func TestFleetClusterProxy(t *testing.T) {
	t.Parallel()
	cl := rediscluster.Start(t, 3)
	f := fleet.Start(t, 2, fmt.Sprintf(`
store: { type: valkey, valkey: { addrs: [%q, %q, %q], timeout: 2s } }
real_ip: { header: X-Forwarded-For, trusted_proxies: [127.0.0.1] }
upstreams: { echo: { builtin: echo } }
policies:
  per_key: { algorithm: fixed_window, limit: 2, window: 1h, key: header:X-API-Key, on_store_error: deny }
  per_ip: { algorithm: sliding_log, limit: 5, window: 1h, key: ip, on_store_error: deny }
routes:
  - { name: api, upstream: echo, policies: [per_key, per_ip] }
`, cl.Addrs[0], cl.Addrs[1], cl.Addrs[2]))
	e2eAwayFromBoundary(t, time.Hour, 30*time.Second)
	const clients = 300
	var mu sync.Mutex
	bad := map[string]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range clients {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ip := fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256)
			var got []int
			for r := range 3 {
				req, _ := http.NewRequest(http.MethodGet, f.URL(r%2)+"/x", nil)
				req.Header.Set("X-Forwarded-For", ip)
				req.Header.Set("X-API-Key", fmt.Sprintf("key-%d", i))
				code := 0
				if resp, err := http.DefaultClient.Do(req); err == nil {
					code = resp.StatusCode
					resp.Body.Close()
				}
				got = append(got, code)
			}
			if s := fmt.Sprint(got); s != "[200 200 429]" {
				mu.Lock()
				bad[s]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("clients with other status sequences than [200 200 429]: %v", bad)
	}
}

// TestFleetKillFreesLeases: an rlproxy instance killed mid-request holds
// concurrency slots on Valkey only until their lease expires (no renewal
// once it is dead); the surviving instance then admits again. Lease 600 ms:
// slots stay taken at +300 ms after the kill, are free by +1 s.
func TestFleetKillFreesLeases(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	release := make(chan struct{})
	up := rlproxytest.NewUpstream(t)
	up.Handler = func(w http.ResponseWriter, r *http.Request) {
		select { // held until the test ends: only the kill can end these
		case <-release:
		case <-r.Context().Done():
		}
	}
	t.Cleanup(func() { close(release) })
	f := fleet.Start(t, 2, fmt.Sprintf(`
store: { type: valkey, valkey: { addrs: [%q], timeout: 2s } }
upstreams: { app: { url: %q } }
policies:
  cc: { algorithm: concurrency, limit: 2, lease: 600ms, key: global, on_store_error: deny }
routes:
  - { name: cc, upstream: app, policies: [cc] }
`, srv.Addr, up.URL))
	// Two long requests through instance 0 take both slots.
	for range 2 {
		go func() {
			resp, err := http.Get(f.URL(0) + "/long")
			if err == nil {
				resp.Body.Close()
			}
		}()
	}
	waitfor.True(t, "two long requests at the upstream", func() bool { return up.Count() >= 2 })
	if up.Count() != 2 {
		t.Fatalf("upstream saw %d long requests, want 2", up.Count())
	}
	// While instance 0 lives it renews its leases: once the clock is past
	// the first expiries, only renewals keep the slots held.
	first := fleetLeases(t, srv)
	waitfor.True(t, "the first leases' expiry passed", func() bool { return time.Now().UnixMilli() > slices.Max(first) })
	if resp, _ := rlproxytest.Get(t, nil, f.URL(1)+"/x"); resp.StatusCode != 429 {
		t.Fatalf("both slots held by a live instance past their first expiry: status %d, want 429", resp.StatusCode)
	}
	f.Kill(0)
	// A killed instance releases nothing: the slots stay leased until the
	// expiries its last renewals wrote.
	last := fleetLeases(t, srv)
	if slices.Min(last) <= slices.Max(first) {
		t.Fatalf("lease expiries %v after the kill, first ones %v: the live instance did not renew", last, first)
	}
	resp, _ := rlproxytest.Get(t, nil, f.URL(1)+"/x")
	if answered := time.Now().UnixMilli(); answered >= slices.Min(last) {
		t.Fatalf("the request after the kill was answered at %d ms, not before the first lease expiry %d: too late to tell", answered, slices.Min(last))
	}
	if resp.StatusCode != 429 {
		t.Fatalf("after the kill, before the leases' expiry: status %d, want 429 (slots still leased)", resp.StatusCode)
	}
	waitfor.True(t, "the dead instance's leases expired", func() bool { return time.Now().UnixMilli() > slices.Max(last) })
	// Both dead slots have expired: two new long requests fit again and
	// reach the upstream (then give up at 500 ms, releasing their slots).
	var refused atomic.Int32
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 500 * time.Millisecond}
			if resp, err := c.Get(f.URL(1) + "/again"); err == nil {
				if resp.StatusCode == 429 {
					refused.Add(1)
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if up.Count() != 4 || refused.Load() != 0 {
		t.Fatalf("after the leases' expiry: upstream saw %d requests (want 4), %d refused (want 0): the dead instance's leases did not expire",
			up.Count(), refused.Load())
	}
}

// fleetDecided sums rlproxy_requests_total of route on the instance whose
// admin listener is adminURL.
func fleetDecided(t *testing.T, adminURL, route string) float64 {
	resp, body := rlproxytest.Get(t, nil, adminURL+"/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s/metrics: status %d", adminURL, resp.StatusCode)
	}
	n := 0.0
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "rlproxy_requests_total{") && strings.Contains(line, `route="`+route+`"`) {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			n += v
		}
	}
	return n
}

// fleetLeases returns the expiry times (Unix ms, the scores) of the
// concurrency leases in srv, which must hold exactly one sorted set of
// two leases.
func fleetLeases(t *testing.T, srv *redisserver.Server) []int64 {
	t.Helper()
	keys, err := srv.Do(t, "KEYS", "*").AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	var exp []int64
	for _, k := range keys {
		if typ, _ := srv.Do(t, "TYPE", k).ToString(); typ != "zset" {
			continue
		}
		zs, err := srv.Do(t, "ZRANGE", k, "0", "-1", "WITHSCORES").AsZScores()
		if err != nil {
			t.Fatal(err)
		}
		for _, z := range zs {
			exp = append(exp, int64(z.Score))
		}
	}
	if len(exp) != 2 {
		t.Fatalf("leases in the store: %v (keys %v), want 2", exp, keys)
	}
	return exp
}
