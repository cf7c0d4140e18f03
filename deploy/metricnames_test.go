package deploy_test

// Every metric the dashboard and the alert rules query is one a running
// rlproxy exposes: two live instances (one on the memory store, one on a
// real redis-server that is then stopped) get traffic that touches every
// family — allowed, delayed and refused requests, a shaping cap, no route,
// a dead upstream pool with a retry, a store outage — and the names they
// serve on /metrics must cover every name the two files use.

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/redisserver"
	"rlproxy/internal/testutil/rlproxytest"
)

// metricRE finds rlproxy metric names in PromQL; histogram series names
// are reduced to their family.
var metricRE = regexp.MustCompile(`rlproxy_[a-z_]+`)

func familyOf(name string) string {
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := strings.CutSuffix(name, suf); ok {
			return f
		}
	}
	return name
}

// usedNames is every metric family the dashboard and the alert rules name.
func usedNames(t *testing.T) map[string][]string {
	t.Helper()
	used := map[string][]string{}
	for _, f := range []string{"grafana/rlproxy.json", "prometheus/rlproxy-alerts.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range metricRE.FindAllString(string(b), -1) {
			used[familyOf(n)] = append(used[familyOf(n)], f)
		}
	}
	return used
}

// scrapeNames adds the metric families served at admin/metrics to got.
func scrapeNames(t *testing.T, admin string, got map[string]bool) {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "rlproxy_") {
			name := l[:strings.IndexAny(l, "{ ")]
			got[familyOf(name)] = true
		}
	}
}

// get sends n requests to url (concurrently when par > 1) and returns the
// status codes seen.
func get(t *testing.T, url string, n, par int, hdr ...string) map[int]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, par)
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			req, _ := http.NewRequest("GET", url, nil)
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Set(hdr[i], hdr[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				codes[-1]++
				return
			}
			resp.Body.Close()
			codes[resp.StatusCode]++
		}()
	}
	wg.Wait()
	return codes
}

func TestDashboardAndAlertMetricsExist(t *testing.T) {
	got := map[string]bool{}
	dead1, dead2 := netutil.FreeAddr(t), netutil.FreeAddr(t) // nobody listens there

	// Memory store: traffic, shaping, no route, a dead pool (with a retry).
	mem := rlproxytest.Start(t, fmt.Sprintf(`
server: { max_waiting: 1 }
upstreams:
  demo: { builtin: echo }
  dead: { urls: ["http://%s", "http://%s"], retries: 1 }
policies:
  api: { algorithm: token_bucket, rate: 1r/m, burst: 2, key: ip }
  shaped: { algorithm: leaky_bucket, rate: 5r/s, burst: 20, key: ip }
routes:
  - { name: api, match: { path_prefix: /api/ }, upstream: demo, policies: [api] }
  - { name: shaped, match: { path_prefix: /shaped/ }, upstream: demo, policies: [shaped] }
  - { name: dead, match: { path_prefix: /dead/ }, upstream: dead }
`, dead1, dead2))
	get(t, mem.URL+"/api/x", 4, 1)
	get(t, mem.URL+"/shaped/x", 6, 6)
	get(t, mem.URL+"/dead/x", 2, 1)
	get(t, mem.URL+"/nowhere", 1, 1) // matches no route: route "-"
	scrapeNames(t, mem.AdminURL, got)

	// Valkey store: decisions, then the server stops and a fail-open
	// policy decides without it.
	rs := redisserver.Start(t)
	vk := rlproxytest.Start(t, fmt.Sprintf(`
store:
  type: valkey
  valkey: { addrs: [%q], timeout: 500ms }
upstreams: { demo: { builtin: echo } }
policies:
  api: { algorithm: fixed_window, limit: 100, window: 1m, key: ip, on_store_error: allow }
routes:
  - { name: api, upstream: demo, policies: [api] }
`, rs.Addr))
	get(t, vk.URL+"/x", 3, 1)
	rs.Stop()
	get(t, vk.URL+"/x", 3, 1)
	scrapeNames(t, vk.AdminURL, got)

	var missing []string
	for name, files := range usedNames(t) {
		if !got[name] {
			missing = append(missing, fmt.Sprintf("%s (in %s)", name, strings.Join(dedup(files), ", ")))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("names the dashboard or the alerts use that no running rlproxy exposed:\n  %s", strings.Join(missing, "\n  "))
	}
}

func dedup(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
