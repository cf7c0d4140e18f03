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
