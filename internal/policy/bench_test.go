package policy

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"rlproxy/internal/clientkey"
	"rlproxy/internal/config"
	"rlproxy/internal/control"
	"rlproxy/internal/reqview"
	"rlproxy/internal/store/memory"
)

// benchPlanKeys is how many credentials the "plan" case's keys_file maps
// (4 MB): enough that the plan index does not sit in the CPU caches.
const benchPlanKeys = 100_000

// BenchmarkDecide measures the decision path on the memory store, decided
// and released per request: "plain" is an enforcing token bucket and a
// dry-run fixed window; "lease" adds a concurrency limit (a lease id, and
// the release round trip); "plan" is a route whose only policy comes from
// its plan, requests cycling through 1024 of benchPlanKeys known
// credentials (the plan lookup, then a token bucket keyed by the
// credential); "plain-1M-entries" is "plain" with a million control
// entries (bans of other addresses) in the enforcing policy: the cost of
// a client with none. Its allocs/op are the policy layer's own plus the
// memory store's.
func BenchmarkDecide(b *testing.B) {
	keysFile := filepath.Join(b.TempDir(), "keys.yaml")
	benchKeysFile(b, keysFile)
	for _, tc := range []struct {
		name, route string
		entries     int
	}{
		{"plain", "policies: [api, hourly]", 0},
		{"lease", "policies: [api, hourly, inflight]", 0},
		{"plan", "plan: tiers", 0},
		{"plain-1M-entries", "policies: [api, hourly]", 1_000_000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg, err := config.ParseWith("bench.yaml", []byte(`
upstreams: { app: { url: "http://127.0.0.1:1" } }
policies:
  api: { algorithm: token_bucket, rate: 1000000r/s, burst: 1000000, key: ip }
  hourly: { algorithm: fixed_window, limit: 10000000, window: 1h, key: ip, dry_run: true }
  inflight: { algorithm: concurrency, limit: 10, key: ip }
  planned: { algorithm: token_bucket, rate: 1000000r/s, burst: 1000000 }
  anon: { algorithm: token_bucket, rate: 1r/s, burst: 1 }
plans:
  tiers: { key: header:X-API-Key, default: free, plans: { free: [anon], pro: [planned] }, keys_file: `+keysFile+` }
routes: [ { name: all, upstream: app, `+tc.route+` } ]
`), config.LoadOptions{})
			if err != nil {
				b.Fatal(err)
			}
			// The store's clock advances 1 s per decision, so no policy
			// ever refuses however many iterations run.
			var now int64 = 1_700_000_000_000
			st := memory.New(memory.Options{MaxKeys: 10_000, SweepInterval: -1, Clock: func() int64 { now += 1000; return now }})
			defer st.Close()
			l, err := New(cfg, Options{Store: st, LeasePrefix: "b-", Control: benchEntries(b, cfg, tc.entries)})
			if err != nil {
				b.Fatal(err)
			}
			rt := l.Routes()[0]
			var reqs [1024]*reqview.View
			for i := range reqs {
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("X-API-Key", benchKey(i*97))
				reqs[i] = view(r)
			}
			ip := netip.MustParseAddr("192.0.2.1")
			ctx := context.Background()
			var res Result
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := l.Decide(ctx, rt, reqs[i%len(reqs)], ip, &res); err != nil || res.Outcome != Pass {
					b.Fatal(err, res.Outcome)
				}
				l.Release(&res)
				i++
			}
		})
	}
}

// benchEntries is a Controller holding n bans of other addresses in
// policy api (nil for none): the decided client has no entry.
func benchEntries(b *testing.B, cfg *config.Config, n int) *control.Controller {
	if n == 0 {
		return nil
	}
	c, err := control.New(control.Options{MaxEntries: n})
	if err != nil {
		b.Fatal(err)
	}
	c.Configure(cfg)
	for i := range n {
		addr := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		if _, err := c.Set(context.Background(), control.Request{Policy: "api", Source: "ip", Key: addr.String(), Action: control.ActionBan}, "bench"); err != nil {
			b.Fatal(err)
		}
	}
	return c
}

// view is r's request view (reqview.Read: r's header map shared, not copied).
func view(r *http.Request) *reqview.View {
	v, _ := reqview.Read(r)
	return &v
}

// benchKey is the i-th credential of benchKeysFile.
func benchKey(i int) string { return fmt.Sprintf("key-%012d", i) }

// benchKeysFile writes benchPlanKeys `credential: pro` lines to path.
func benchKeysFile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := range benchPlanKeys {
		fmt.Fprintf(w, "%s: pro\n", benchKey(i))
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPlanLookup measures a known credential's plan lookup alone,
// from the Sum of its id to the plan number, in an index of 1,280,000
// credentials (bench/configmem.sh's keys_file), sums cycling through 4096
// of them.
func BenchmarkPlanLookup(b *testing.B) {
	const n = 1_280_000
	entries := make([]planEntry, n)
	for i := range entries {
		h := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
		copy(entries[i].sum[:], h[:])
		entries[i].plan = uint32(i % 2)
	}
	var sums [4096]clientkey.Sum
	for i := range sums {
		sums[i] = entries[i*311].sum
	}
	x := newPlanIndex(entries)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, known := x.lookup(sums[i%len(sums)]); !known {
			b.Fatal("not found")
		}
		i++
	}
}

// benchMatchConfig is BenchmarkMatch's routes: a limited host, a method,
// a prefix and an exact path before the catch-all, as operators write them.
const benchMatchConfig = `
upstreams: { app: { url: "http://127.0.0.1:1" } }
policies:
  api: { algorithm: token_bucket, rate: 10r/s, burst: 10, key: ip }
routes:
  - { name: admin, upstream: app, match: { host: admin.test }, policies: [api] }
  - { name: login, upstream: app, match: { path: /login, methods: [POST] }, policies: [api] }
  - { name: items, upstream: app, match: { path_prefix: /api/v2/ }, policies: [api] }
  - { name: exact, upstream: app, match: { path: /exact }, policies: [api] }
  - { name: all, upstream: app }
`

// BenchmarkMatch measures reading a request for routing (reqview.Read)
// and matching it against benchMatchConfig's routes: "clean" a path that
// needs no normalizing, "dirty" one with dot segments, slashes and a
// %-escape. Both fall through to the catch-all.
func BenchmarkMatch(b *testing.B) {
	cfg, err := config.ParseWith("bench.yaml", []byte(benchMatchConfig), config.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	l, err := New(cfg, Options{Store: memory.New(memory.Options{SweepInterval: -1})})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, target string }{
		{"clean", "/api/v1/items/42?x=1"},
		{"dirty", "//api/./v1/x/../items/%34%32?x=1"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := httptest.NewRequest("GET", tc.target, nil)
			r.Host = "Api.Test:8080"
			b.ReportAllocs()
			for b.Loop() {
				v, reason := reqview.Read(r)
				if reason != reqview.OK || l.Match(&v).Name != "all" {
					b.Fatal(reason)
				}
			}
		})
	}
}
