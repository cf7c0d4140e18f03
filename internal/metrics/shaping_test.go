package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestShapingRefusals: one series per route and cap, counting calls.
func TestShapingRefusals(t *testing.T) {
	m := New(prometheus.NewRegistry(), "test")
	m.ShapingRefusal("api", CapMaxWaiting)
	m.ShapingRefusal("api", CapMaxWaiting)
	m.ShapingRefusal("api", CapMaxWait)
	out := scrape(t, m)
	for series, want := range map[string]string{
		`rlproxy_shaping_refusals_total{cap="max_waiting",route="api"}`: "2",
		`rlproxy_shaping_refusals_total{cap="max_wait",route="api"}`:    "1",
	} {
		if got := sample(out, series); got != want {
			t.Errorf("%s = %q, want %q", series, got, want)
		}
	}
	promtoolCheck(t, out)
}

// TestWaitingLimit: the gauge holds the last server.max_waiting set.
func TestWaitingLimit(t *testing.T) {
	m := New(prometheus.NewRegistry(), "test")
	m.SetWaitingLimit(10000)
	m.SetWaitingLimit(250)
	if got := sample(scrape(t, m), "rlproxy_waiting_requests_limit"); got != "250" {
		t.Fatalf("rlproxy_waiting_requests_limit = %q, want 250", got)
	}
}
