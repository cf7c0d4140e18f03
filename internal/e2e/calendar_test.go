package e2e

import (
	"fmt"
	"testing"
	"time"

	"rlproxy/internal/testutil/fakeclock"
	"rlproxy/internal/testutil/rlproxytest"
)

// TestCalendarWindows: calendar quotas through the proxy at injected
// instants, on the memory store and on Valkey: a calendar month in UTC
// across January's end (w = 31 days, then 28), and a day in Europe/Berlin
// across the spring DST change (w = 23 h, then 24 h), with exact t and
// Retry-After (the seconds to the period's end).
func TestCalendarWindows(t *testing.T) {
	for _, st := range e2eStores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			start, _ := time.Parse(time.RFC3339Nano, "2027-01-31T23:59:58.500Z")
			clk := fakeclock.New(start)
			up := rlproxytest.NewUpstream(t)
			in := rlproxytest.Start(t, storeYAML(t, st)+fmt.Sprintf(`
upstreams: { app: { url: %q } }
policies:
  monthly: { algorithm: fixed_window, limit: 2, calendar: month, key: ip }
  daily: { algorithm: fixed_window, limit: 1, calendar: day, timezone: Europe/Berlin, key: ip }
routes:
  - { name: m, match: { path_prefix: /m/ }, upstream: app, policies: [monthly] }
  - { name: d, match: { path_prefix: /d/ }, upstream: app, policies: [daily] }
`, up.URL), rlproxytest.WithNow(clk.Now))
			expect := func(path string, status int, headers map[string]string) {
				t.Helper()
				resp, _ := rlproxytest.Get(t, nil, in.URL+path)
				if resp.StatusCode != status {
					t.Fatalf("%s at %s: status %d, want %d", path, clk.Now().Format(time.RFC3339Nano), resp.StatusCode, status)
				}
				for h, want := range headers {
					if got := resp.Header.Get(h); got != want {
						t.Errorf("%s at %s: %s = %q, want %q", path, clk.Now().Format(time.RFC3339Nano), h, got, want)
					}
				}
			}
			// January's last 1.5 s: 2 pass, the third waits 2 s (1.5 rounded up).
			jan := map[string]string{"RateLimit-Policy": `"monthly";q=2;w=2678400`, "RateLimit": `"monthly";r=0;t=2`}
			expect("/m/a", 200, map[string]string{"RateLimit": `"monthly";r=1;t=2`})
			expect("/m/a", 200, jan)
			expect("/m/a", 429, map[string]string{"Retry-After": "2", "RateLimit-Policy": `"monthly";q=2;w=2678400`})
			clk.Advance(1500 * time.Millisecond) // February 1, 00:00:00.000 UTC
			expect("/m/a", 200, map[string]string{"RateLimit-Policy": `"monthly";q=2;w=2419200`, "RateLimit": `"monthly";r=1;t=2419200`})

			// Berlin, March 28 2027 12:00 CEST: a 23 h day, 12 h left.
			clk.Advance(time.Date(2027, 3, 28, 10, 0, 0, 0, time.UTC).Sub(clk.Now()))
			expect("/d/a", 200, map[string]string{"RateLimit-Policy": `"daily";q=1;w=82800`, "RateLimit": `"daily";r=0;t=43200`})
			expect("/d/a", 429, map[string]string{"Retry-After": "43200", "RateLimit": `"daily";r=0;t=43200`})
			clk.Advance(12*time.Hour - time.Millisecond)
			expect("/d/a", 429, map[string]string{"Retry-After": "1"})
			clk.Advance(time.Millisecond) // March 29 00:00 CEST: a 24 h day
			expect("/d/a", 200, map[string]string{"RateLimit-Policy": `"daily";q=1;w=86400`, "RateLimit": `"daily";r=0;t=86400`})
			if up.Count() != 5 {
				t.Errorf("upstream saw %d requests, want 5", up.Count())
			}
		})
	}
}
