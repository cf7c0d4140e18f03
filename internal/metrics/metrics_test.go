package metrics

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// scrape fetches /metrics over loopback HTTP in the text format.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %d: %s", resp.StatusCode, body)
	}
	return string(body)
}

// sample returns the value text of the series line starting with series
// (name and labels exactly as exposed), or "" when absent.
func sample(scrape, series string) string {
	for line := range strings.SplitSeq(scrape, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

type fakeMemory struct {
	n         int
	evictions uint64
}

func (f *fakeMemory) Len() int          { return f.n }
func (f *fakeMemory) Evictions() uint64 { return f.evictions }

func TestScrapeValues(t *testing.T) {
	m := New(prometheus.NewRegistry(), "v1.2.3")

	api := m.PolicyCounters("api", "api")
	hourly := m.PolicyCounters("api", "hourly")
	for range 3 {
		api.Allowed.Inc()
		hourly.Allowed.Inc()
	}
	api.Rejected.Inc()
	hourly.NotCharged.Inc()
	api.Delayed.Add(2)
	// Resolving again (a reload) must return the same series, not reset them.
	m.PolicyCounters("api", "api").Allowed.Inc()
	m.PolicyCounters("login", "login").StoreError.Inc()
	m.PolicyCounters("login", "login").DryRunRejected.Inc()
	m.UpstreamErrors("api").Inc()
	m.SetStoreUp(true)
	m.StoreError()
	m.StoreError()
	m.ObserveDecision(3 * time.Millisecond)
	m.ObserveStore(40 * time.Microsecond)
	m.ObserveDelay(1500 * time.Millisecond)
	m.ObserveDelay(250 * time.Millisecond)
	m.AddWaiting(3)
	m.AddWaiting(-1)
	m.SetBreakerOpen(true)
	m.LocalRefusal()
	m.ConfigLoaded(time.UnixMilli(1_000_000_000_000))
	m.ConfigReload(false, time.UnixMilli(1_000_000_005_000))
	m.ConfigReload(true, time.UnixMilli(1_000_000_010_500))

	mem := &fakeMemory{n: 42, evictions: 7}
	m.SetMemoryStore(mem)
	// A reload swaps in a fresh store: evictions carry over, keys do not.
	m.SetMemoryStore(&fakeMemory{n: 5, evictions: 1})

	out := scrape(t, m)
	want := map[string]string{
		`rlproxy_requests_total{decision="allowed",policy="api",route="api"}`:              "4",
		`rlproxy_requests_total{decision="allowed",policy="hourly",route="api"}`:           "3",
		`rlproxy_requests_total{decision="rejected",policy="api",route="api"}`:             "1",
		`rlproxy_requests_total{decision="rejected",policy="hourly",route="api"}`:          "0",
		`rlproxy_requests_total{decision="not_charged",policy="hourly",route="api"}`:       "1",
		`rlproxy_requests_total{decision="delayed",policy="api",route="api"}`:              "2",
		`rlproxy_requests_total{decision="store_error",policy="login",route="login"}`:      "1",
		`rlproxy_requests_total{decision="dry_run_rejected",policy="login",route="login"}`: "1",
		`rlproxy_requests_total{decision="allowed",policy="login",route="login"}`:          "0",
		`rlproxy_upstream_errors_total{route="api"}`:                                       "1",
		`rlproxy_store_up`:                                      "1",
		`rlproxy_store_errors_total`:                            "2",
		`rlproxy_decision_duration_seconds_count`:               "1",
		`rlproxy_decision_duration_seconds_bucket{le="0.0025"}`: "0",
		`rlproxy_decision_duration_seconds_bucket{le="0.005"}`:  "1",
		`rlproxy_store_duration_seconds_bucket{le="5e-05"}`:     "1",
		`rlproxy_delay_seconds_count`:                           "2",
		`rlproxy_delay_seconds_sum`:                             "1.75",
		`rlproxy_delay_seconds_bucket{le="1"}`:                  "1",
		`rlproxy_waiting_requests`:                              "2",
		`rlproxy_breaker_open`:                                  "1",
		`rlproxy_local_refusals_total`:                          "1",
		`rlproxy_config_reloads_total{result="success"}`:        "1",
		`rlproxy_config_reloads_total{result="failure"}`:        "1",
		`rlproxy_config_last_reload_success_timestamp_seconds`:  "1.0000000105e+09",
		`rlproxy_memory_store_keys`:                             "5",
		`rlproxy_memory_store_evictions_total`:                  "8",
	}
	for series, v := range want {
		if got := sample(out, series); got != v {
			t.Errorf("%s = %q, want %q", series, got, v)
		}
	}
	if !strings.Contains(out, `rlproxy_build_info{goversion="go`) || !strings.Contains(out, `version="v1.2.3"} 1`) {
		t.Errorf("build_info missing or wrong:\n%s", grep(out, "rlproxy_build_info"))
	}
	if !strings.Contains(out, "go_goroutines") {
		t.Error("Go runtime collector not registered")
	}

	// Valkey after a reload: the memory metrics disappear rather than report 0.
	m.SetMemoryStore(nil)
	if out := scrape(t, m); strings.Contains(out, "rlproxy_memory_store") {
		t.Errorf("memory store metrics reported with no memory store:\n%s", grep(out, "rlproxy_memory_store"))
	}
	// And come back monotonic: 7 + 1 carried over, plus the new store's 2.
	m.SetMemoryStore(&fakeMemory{evictions: 2})
	if got := sample(scrape(t, m), "rlproxy_memory_store_evictions_total"); got != "10" {
		t.Errorf("evictions after second swap = %q, want 10", got)
	}

	promtoolCheck(t, out)
}

// promtoolCheck runs `promtool check metrics` (the Prometheus project's
// exposition linter) on a scrape.
func promtoolCheck(t *testing.T, scrape string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("RLPROXY_REQUIRE_TOOLS") == "1" {
			t.Fatal("promtool not found and RLPROXY_REQUIRE_TOOLS=1")
		}
		t.Skip("promtool not installed")
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(scrape)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
}

func grep(s, substr string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, substr) {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// The request path must not allocate for metrics (DESIGN: hot paths
// allocation-free).
func TestHotPathAllocs(t *testing.T) {
	m := New(prometheus.NewRegistry(), "test")
	pc := m.PolicyCounters("r", "p")
	upstream := m.UpstreamErrors("r")
	allocs := testing.AllocsPerRun(1000, func() {
		pc.Allowed.Inc()
		pc.NotCharged.Inc()
		upstream.Inc()
		m.ObserveDecision(time.Millisecond)
		m.ObserveStore(time.Millisecond)
		m.ObserveDelay(time.Second)
		m.AddWaiting(1)
		m.AddWaiting(-1)
		m.SetStoreUp(true)
		m.StoreError()
		m.LocalRefusal()
		m.SetBreakerOpen(false)
	})
	if allocs != 0 {
		t.Errorf("hot path allocates %v times per request, want 0", allocs)
	}
}

func TestNewPerRegistry(t *testing.T) {
	// Two instances on two registries must not collide (no package state).
	a := New(prometheus.NewRegistry(), "a")
	b := New(prometheus.NewRegistry(), "b")
	a.PolicyCounters("r", "p").Allowed.Inc()
	if got := sample(scrape(t, b), `rlproxy_requests_total{decision="allowed",policy="p",route="r"}`); got != "" {
		t.Errorf("second registry sees the first one's series: %q", got)
	}
}
