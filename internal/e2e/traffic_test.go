package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"rlproxy/internal/testutil/rlproxytest"
)

// TestTrafficMetricsMix: after a scripted mix of answers,
// rlproxy_http_requests_total holds exact counts per route and code —
// rlproxy's own answers (404 no route, 429, 502, 504) and a route without
// policies included — and the scrape passes promtool.
func TestTrafficMetricsMix(t *testing.T) {
	a := newPoolServer(t, "a")
	dead := newPoolServer(t, "dead")
	dead.kill()
	slow := rlproxytest.NewUpstream(t)
	slow.Handler = func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	}
	in := rlproxytest.Start(t, fmt.Sprintf(`upstreams:
  app: { url: %q }
  dead: { url: %q }
  slow: { url: %q, response_header_timeout: 200ms }
policies:
  one: { algorithm: sliding_log, limit: 1, window: 1h }
routes:
  - { name: open, match: { path: /open }, upstream: app }
  - { name: limited, match: { path: /limited }, upstream: app, policies: [one] }
  - { name: dead, match: { path: /dead }, upstream: dead }
  - { name: slow, match: { path: /slow }, upstream: slow }
`, a.url(), dead.url(), slow.URL))
	c := poolClient()
	script := []struct {
		path string
		n    int
		want int
	}{{"/open", 3, 200}, {"/nowhere", 2, 404}, {"/limited", 1, 200}, {"/limited", 2, 429}, {"/dead", 1, 502}, {"/slow", 1, 504}}
	for _, s := range script {
		for range s.n {
			if code, _, _ := poolGet(c, in.URL+s.path); code != s.want {
				t.Fatalf("%s: %d, want %d", s.path, code, s.want)
			}
		}
	}
	text, samples := opsScrape(t, in)
	for _, w := range []struct {
		route, code string
		n           float64
	}{{"open", "200", 3}, {"-", "404", 2}, {"limited", "200", 1}, {"limited", "429", 2}, {"dead", "502", 1}, {"slow", "504", 1}} {
		if got := opsValue(t, samples, "rlproxy_http_requests_total", "route", w.route, "code", w.code); got != w.n {
			t.Errorf("rlproxy_http_requests_total{route=%q,code=%q} = %v, want %v", w.route, w.code, got, w.n)
		}
	}
	if got := opsValue(t, samples, "rlproxy_http_request_duration_seconds_count", "route", "open"); got != 3 {
		t.Errorf("rlproxy_http_request_duration_seconds_count{route=open} = %v, want 3", got)
	}
	if got := opsValue(t, samples, "rlproxy_upstream_request_duration_seconds_count", "upstream", "app"); got != 4 {
		t.Errorf("rlproxy_upstream_request_duration_seconds_count{upstream=app} = %v, want 4", got)
	}
	if got := opsValue(t, samples, "rlproxy_upstream_server_up", "upstream", "app", "server", a.addr); got != 1 {
		t.Errorf("rlproxy_upstream_server_up{app} = %v, want 1", got)
	}
	opsPromtool(t, text)
}
