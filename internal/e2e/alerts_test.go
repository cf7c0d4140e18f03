package e2e

// The shipped alerts (deploy/prometheus/rlproxy-alerts.yaml) judged on
// series a real rlproxy exposes during a real fault and after it: each
// scrape is one minute of promtool time (promrules), so an alert's `for`
// and rate windows are counted in scrapes.

import (
	"fmt"
	"io"
	"net/http"
	"strings"
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
func alertLoad(url string) (stop func()) { return alertLoadWith(url, 4, "") }

// alertLoadWith sends GETs to url from n clients until the returned stop
// is called (which waits for them); each request carries X-Client: client,
// or a fresh value each time when client is "".
func alertLoadWith(url string, n int, client string) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	var seq atomic.Int64
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	for range n {
		wg.Go(func() {
			for !done.Load() {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				id := client
				if id == "" {
					id = fmt.Sprint("c", seq.Add(1))
				}
				req.Header.Set("X-Client", id)
				if resp, err := c.Do(req); err == nil {
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
			<-r.Context().Done() // no answer: rlproxy's header timeout ends it
			return
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

// TestAlertHighRefusalRatio: steady traffic of fresh clients (all allowed)
// and, for 15 scrapes, one client hammering past its limit (most of the
// route's decisions refused) fire RlproxyHighRefusalRatio (for: 10m); 12
// scrapes after it stopped the alert is resolved.
func TestAlertHighRefusalRatio(t *testing.T) {
	t.Parallel()
	in := rlproxytest.Start(t, `
store: { type: memory }
upstreams: { echo: { builtin: echo } }
policies:
  p: { algorithm: fixed_window, limit: 5, window: 1h, key: "header:X-Client" }
routes:
  - { name: api, match: { path_prefix: / }, upstream: echo, policies: [p] }
`)
	steady := alertLoadWith(in.URL+"/x", 1, "")
	defer steady()
	rec := promrules.NewRecording("rlproxy_requests_total")
	alertScrape(t, rec, in, 3) // steps 0-2: every client under its limit
	abuse := alertLoadWith(in.URL+"/x", 3, "abuser")
	alertScrape(t, rec, in, 15) // steps 3-17: one client refused again and again
	abuse()
	alertScrape(t, rec, in, 12) // steps 18-29: normal again
	rec.Check(t, alertRules, "RlproxyHighRefusalRatio", map[int]bool{2: false, 17: true, 29: false})
}

// TestAlertReloadFailing: a refused reload (an invalid file) fires
// RlproxyReloadFailing at once; 17 scrapes after a good file was loaded
// (past its 15m window) it is resolved.
func TestAlertReloadFailing(t *testing.T) {
	t.Parallel()
	good := `
store: { type: memory }
upstreams: { echo: { builtin: echo } }
routes:
  - { name: api, match: { path_prefix: / }, upstream: echo }
`
	in := rlproxytest.Start(t, good)
	rec := promrules.NewRecording("rlproxy_config_reloads_total")
	alertScrape(t, rec, in, 3) // steps 0-2
	in.Rewrite(t, "admin_listen: \"127.0.0.1:0\"\nlisten: \"127.0.0.1:0\"\n"+strings.Replace(good, "echo }", "echo, bogus: 1 }", 1))
	in.App.Reload("test")
	alertScrape(t, rec, in, 3) // steps 3-5: refused
	in.Rewrite(t, "admin_listen: \"127.0.0.1:0\"\nlisten: \"127.0.0.1:0\"\n"+good+"\n# changed\n")
	in.App.Reload("test")
	alertScrape(t, rec, in, 18) // steps 6-23
	rec.Check(t, alertRules, "RlproxyReloadFailing", map[int]bool{2: false, 5: true, 23: false})
}

// TestAlertShapingQueueNearCap: 16 clients of one address on a leaky
// bucket (10r/s, delay mode, server.max_waiting 10) keep the queue full
// for 12 scrapes, firing RlproxyShapingQueueNearCap (for: 5m); once they
// stop, it is resolved.
// The queue drains at 2 r/s, so one of the 6 looping refused clients has
// 500 ms to take a freed place before a scrape could see fewer than 9
// waiting (at 10 r/s a loaded host's clients missed the 100 ms and a
// scrape read 8, not above 0.8 × 10).
func TestAlertShapingQueueNearCap(t *testing.T) {
	t.Parallel()
	in := rlproxytest.Start(t, `
store: { type: memory }
server: { max_waiting: 10 }
upstreams: { echo: { builtin: echo } }
policies: { shape: { algorithm: leaky_bucket, rate: 2r/s, burst: 20, key: ip } }
routes: [ { name: all, upstream: echo, policies: [shape] } ]
`)
	rec := promrules.NewRecording("rlproxy_waiting_requests", "rlproxy_waiting_requests_limit")
	alertScrape(t, rec, in, 3) // steps 0-2: idle
	flood := alertLoadWith(in.URL+"/x", 16, "x")
	alertScrape(t, rec, in, 12) // steps 3-14: the queue at its cap
	flood()
	alertScrape(t, rec, in, 8) // steps 15-22: empty
	rec.Check(t, alertRules, "RlproxyShapingQueueNearCap", map[int]bool{2: false, 14: true, 22: false})
}
