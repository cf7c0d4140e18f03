package policy

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"testing"

	"rlproxy/internal/config"
	"rlproxy/internal/store/memory"
)

// BenchmarkDecide measures the decision path on the memory store, decided
// and released per request: "plain" is an enforcing token bucket and a
// dry-run fixed window; "lease" adds a concurrency limit (a lease id, and
// the release round trip). Its allocs/op are the policy layer's own plus
// the memory store's.
func BenchmarkDecide(b *testing.B) {
	for _, tc := range []struct{ name, policies string }{
		{"plain", "[api, hourly]"},
		{"lease", "[api, hourly, inflight]"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg, err := config.ParseWith("bench.yaml", []byte(`
upstreams: { app: { url: "http://127.0.0.1:1" } }
policies:
  api: { algorithm: token_bucket, rate: 1000000r/s, burst: 1000000, key: ip }
  hourly: { algorithm: fixed_window, limit: 10000000, window: 1h, key: ip, dry_run: true }
  inflight: { algorithm: concurrency, limit: 10, key: ip }
routes: [ { name: all, upstream: app, policies: `+tc.policies+` } ]
`), config.LoadOptions{})
			if err != nil {
				b.Fatal(err)
			}
			// The store's clock advances 1 s per decision, so no policy
			// ever refuses however many iterations run.
			var now int64 = 1_700_000_000_000
			st := memory.New(memory.Options{MaxKeys: 1000, SweepInterval: -1, Clock: func() int64 { now += 1000; return now }})
			defer st.Close()
			l, err := New(cfg, Options{Store: st, LeasePrefix: "b-"})
			if err != nil {
				b.Fatal(err)
			}
			rt := l.Routes()[0]
			r := httptest.NewRequest("GET", "/", nil)
			ip := netip.MustParseAddr("192.0.2.1")
			ctx := context.Background()
			var res Result
			b.ReportAllocs()
			for b.Loop() {
				if err := l.Decide(ctx, rt, r, ip, &res); err != nil || res.Outcome != Pass {
					b.Fatal(err, res.Outcome)
				}
				l.Release(&res)
			}
		})
	}
}
