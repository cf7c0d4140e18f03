package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestStoreFallback: each fail mode maps to its label and every decision
// made without the store is one count of its policy and mode; a nil
// Metrics counts nothing and does not panic.
func TestStoreFallback(t *testing.T) {
	for _, tc := range []struct {
		closed, floor bool
		want          string
	}{{true, true, "closed"}, {true, false, "closed"}, {false, true, "floor"}, {false, false, "open"}} {
		if got := FallbackMode(tc.closed, tc.floor); got != tc.want {
			t.Errorf("FallbackMode(%v, %v) = %q, want %q", tc.closed, tc.floor, got, tc.want)
		}
	}
	m := New(prometheus.NewRegistry(), "test")
	for range 3 {
		m.StoreFallback("login", FallbackClosed)
	}
	m.StoreFallback("api", FallbackFloor)
	body := scrape(t, m)
	for _, want := range []string{
		`rlproxy_store_fallback_decisions_total{mode="closed",policy="login"} 3`,
		`rlproxy_store_fallback_decisions_total{mode="floor",policy="api"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}
