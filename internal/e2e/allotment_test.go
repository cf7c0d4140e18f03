package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/fleet"
	"rlproxy/internal/testutil/redisserver"
	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// TestFleetAllotments: three rlproxy processes on one Valkey, one busy
// client over one connection spread round robin, a fixed window with
// allotments. The fleet never admits more than the limit; once every
// slice has ended and given its unused units back, the client gets
// exactly the limit; the instances fetched slices (the metrics).
func TestFleetAllotments(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	up := rlproxytest.NewUpstream(t)
	f := fleet.Start(t, 3, fmt.Sprintf(`
store: { type: valkey, valkey: { addrs: [%q], timeout: 2s } }
upstreams: { app: { url: %q } }
policies:
  hot: { algorithm: fixed_window, limit: 300, window: 1h, on_store_error: deny, allotment: { max_fraction: 0.5, ttl: 300ms } }
routes:
  - { name: hot, upstream: app, policies: [hot] }
`, srv.Addr, up.URL))
	urls := []string{f.URL(0), f.URL(1), f.URL(2)}
	c := rlproxytest.ClientFrom("127.0.0.31")
	e2eAwayFromBoundary(t, time.Hour, 60*time.Second)
	codes := fleetSpread(t, c, urls, "/", 600, 1)
	if codes[200] > 300 || codes[200]+codes[429] != 600 {
		t.Fatalf("statuses %v: want at most 300×200, the rest 429", codes)
	}
	// Every slice ends within its ttl and gives its unused units back.
	waitfor.True(t, "every slice's units given back", func() bool {
		held := 0.0
		for i := range urls {
			held += allotMetric(t, f.Procs[i].AdminURL, `rlproxy_allotment_outstanding_units{policy="hot"}`)
		}
		return held == 0
	})
	more := fleetSpread(t, c, urls, "/", 400, 1)
	if got := codes[200] + more[200]; got != 300 {
		t.Errorf("admitted %d (%d, then %d), want exactly the limit 300 once every slice gave its units back", got, codes[200], more[200])
	}
	fetches := 0.0
	for i := range urls {
		fetches += allotMetric(t, f.Procs[i].AdminURL, `rlproxy_allotment_fetches_total{policy="hot"}`)
	}
	if fetches == 0 {
		t.Error("no instance fetched a slice")
	}
	t.Logf("admitted %d then %d; %v fetches", codes[200], more[200], fetches)
}

// allotMetric reads one series' value from an instance's /metrics (0
// when absent).
func allotMetric(t *testing.T, adminURL, series string) float64 {
	t.Helper()
	_, body := rlproxytest.Get(t, nil, adminURL+"/metrics")
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return f
		}
	}
	return 0
}
