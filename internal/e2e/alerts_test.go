package e2e

// The shipped alerts (deploy/prometheus/rlproxy-alerts.yaml) judged on
// series a real rlproxy exposes during a real fault and after it: each
// scrape is one minute of promtool time (promrules), so an alert's `for`
// and rate windows are counted in scrapes.

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/testutil/promrules"
	"rlproxy/internal/testutil/redisserver"
	"rlproxy/internal/testutil/rlproxytest"
)

// alertRules is the shipped rule file.
const alertRules = "../../deploy/prometheus/rlproxy-alerts.yaml"

// alertStep is the real time between two scrapes (one promtool minute).
const alertStep = 250 * time.Millisecond

// alertLoad sends GETs to url from 4 clients until the returned stop is
// called (which waits for them).
func alertLoad(url string) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	c := &http.Client{Timeout: 10 * time.Second}
	for range 4 {
		wg.Go(func() {
			for !done.Load() {
				if resp, err := c.Get(url); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	return func() { done.Store(true); wg.Wait() }
}

// alertScrape scrapes in's metrics n times, alertStep apart.
func alertScrape(t *testing.T, rec *promrules.Recording, in *rlproxytest.Instance, n int) {
	for range n {
		time.Sleep(alertStep)
		rec.Scrape(t, in.AdminURL+"/metrics")
	}
}

// TestAlertUpstreamErrors: an upstream that only times out (every request
// a 504 from response_header_timeout) for 12 scrapes fires
// RlproxyUpstreamErrors (for: 5m); 12 scrapes after it recovered the
// alert is resolved.
func TestAlertUpstreamErrors(t *testing.T) {
	t.Parallel()
	var slow atomic.Bool
	up := rlproxytest.NewUpstream(t)
	up.Handler = func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() {
			time.Sleep(300 * time.Millisecond)
		}
		_, _ = io.WriteString(w, "ok")
	}
	in := e2eStartBehind(t, "memory", up.URL, `
upstreams: { app: { url: %q, response_header_timeout: 100ms } }
routes:
  - { name: api, match: { path_prefix: / }, upstream: app }
`)
	stop := alertLoad(in.URL + "/x")
	defer stop()
	rec := promrules.NewRecording("rlproxy_upstream_errors_total", "rlproxy_http_requests_total")
	alertScrape(t, rec, in, 3) // steps 0-2: healthy
	slow.Store(true)
	alertScrape(t, rec, in, 12) // steps 3-14: every answer a 504
	slow.Store(false)
	alertScrape(t, rec, in, 12) // steps 15-26: healthy again
	rec.Check(t, alertRules, "RlproxyUpstreamErrors", map[int]bool{2: false, 14: true, 26: false})
}

// TestAlertStoreDownBreakerOpen: the one Valkey killed under load for 12
// scrapes fires RlproxyStoreDown (for: 1m) and RlproxyBreakerOpen (for:
// 2m); restarted, both resolve within the 12 scrapes that follow.
func TestAlertStoreDownBreakerOpen(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	in := rlproxytest.Start(t, fmt.Sprintf(`
store:
  type: valkey
  valkey: { addrs: [%q], timeout: 250ms }
  breaker: { failures: 3, cooldown: 200ms }
upstreams: { echo: { builtin: echo } }
policies:
  p: { algorithm: fixed_window, limit: 1000000, window: 1h }
routes:
  - { name: p, match: { path_prefix: / }, upstream: echo, policies: [p] }
`, srv.Addr))
	stop := alertLoad(in.URL + "/x")
	defer stop()
	rec := promrules.NewRecording("rlproxy_store_up", "rlproxy_breaker_open")
	alertScrape(t, rec, in, 3) // steps 0-2: healthy
	srv.Stop()
	alertScrape(t, rec, in, 12) // steps 3-14: down
	srv.Restart()
	alertScrape(t, rec, in, 12) // steps 15-26: back
	for _, alert := range []string{"RlproxyStoreDown", "RlproxyBreakerOpen"} {
		rec.Check(t, alertRules, alert, map[int]bool{2: false, 14: true, 26: false})
	}
}
