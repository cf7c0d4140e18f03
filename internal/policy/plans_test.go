package policy

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"rlproxy/internal/clientkey"
	"rlproxy/internal/config"
	"rlproxy/internal/store/memory"
)

// plansConfig has one plans section keyed by a header or else a query
// parameter, and a route of that plan alone.
const plansConfig = `
upstreams: { app: { url: "http://127.0.0.1:1" } }
policies:
  anon: { algorithm: token_bucket, rate: 1r/s, burst: 5 }
  paid: { algorithm: fixed_window, limit: 100, window: 1h }
plans:
  tiers:
    key: [header:X-API-Key, query:key]
    default: free
    plans: { free: [anon], pro: [paid] }
    keys: { k-pro: pro, k-free: free }
routes: [ { name: all, upstream: app, plan: tiers } ]
`

// TestPlanOfCredential: a known credential's plan is keyed by the
// credential's id, from either source — also a credential of the default
// plan's name — and an unknown or missing credential gets the default
// plan, keyed by its policy's own key (the client address).
func TestPlanOfCredential(t *testing.T) {
	cfg, err := config.ParseWith("plans.yaml", []byte(plansConfig), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New(memory.Options{MaxKeys: 100, SweepInterval: -1})
	defer st.Close()
	l, err := New(cfg, Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := clientkey.New(cfg.Plans["tiers"].Key, cfg.JWT, cfg.Store.HashSecret)
	if err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr("192.0.2.1")
	header := func(v string) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", v)
		return r
	}
	id := func(r *http.Request) string { return string(ex.Key(nil, view(r), ip)) }
	for _, c := range []struct {
		name        string
		r           *http.Request
		policy, key string
	}{
		{"header pro", header("k-pro"), "paid", "rl:v2:{" + id(header("k-pro")) + "}:paid:fw"},
		{"query pro", httptest.NewRequest("GET", "/?key=k-pro", nil), "paid", "rl:v2:{" + id(httptest.NewRequest("GET", "/?key=k-pro", nil)) + "}:paid:fw"},
		{"header free", header("k-free"), "anon", "rl:v2:{" + id(header("k-free")) + "}:anon:tb"},
		{"unknown", header("k-gold"), "anon", "rl:v2:{ip:192.0.2.1}:anon:tb"},
		{"missing", httptest.NewRequest("GET", "/", nil), "anon", "rl:v2:{ip:192.0.2.1}:anon:tb"},
	} {
		var res Result
		if err := l.Decide(context.Background(), l.Routes()[0], view(c.r), ip, &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Items) != 1 {
			t.Fatalf("%s: %d items, want 1", c.name, len(res.Items))
		}
		it := res.Items[0]
		if key := res.stages[it.stage].checks[it.check].Key; it.Policy.Name != c.policy || key != c.key {
			t.Errorf("%s: policy %s key %q, want %s %q", c.name, it.Policy.Name, key, c.policy, c.key)
		}
	}
	if id(header("k-pro"))[:2] != "h:" || id(header("k-pro")) == id(httptest.NewRequest("GET", "/?key=k-pro", nil)) {
		t.Fatalf("ids %q and %q: want two distinct credential ids", id(header("k-pro")), id(httptest.NewRequest("GET", "/?key=k-pro", nil)))
	}
}

// TestCompileAfterReleaseKeys: a Config whose credentials were released
// cannot be compiled into a limiter that would silently give every client
// the default plan.
func TestCompileAfterReleaseKeys(t *testing.T) {
	cfg, err := config.ParseWith("plans.yaml", []byte(plansConfig), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	cfg.ReleaseKeys()
	const want = `compiling plans "tiers": its credentials were released (config.Config.ReleaseKeys): compile before releasing`
	if _, err := New(cfg, Options{}); err == nil || err.Error() != want {
		t.Fatalf("New after ReleaseKeys: %v, want %s", err, want)
	}
}

// TestPlanIndex: every entry of an index is found with its plan, sums not
// in it are not, and the directory has one bucket per two to four entries.
func TestPlanIndex(t *testing.T) {
	sum := func(i int) (s clientkey.Sum) {
		h := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
		copy(s[:], h[:])
		return s
	}
	for _, c := range []struct{ n, buckets int }{{0, 1}, {1, 1}, {4, 1}, {5, 2}, {1000, 256}, {100_000, 32_768}} {
		entries := make([]planEntry, c.n)
		for i := range entries {
			entries[i] = planEntry{sum: sum(i), plan: uint32(i % 7)}
		}
		x := newPlanIndex(entries)
		if len(x.starts) != c.buckets+1 || int(x.starts[c.buckets]) != c.n {
			t.Errorf("%d entries: %d buckets ending at %d, want %d ending at %d", c.n, len(x.starts)-1, x.starts[len(x.starts)-1], c.buckets, c.n)
		}
		for i := range c.n {
			if plan, ok := x.lookup(sum(i)); !ok || plan != uint32(i%7) {
				t.Fatalf("%d entries: entry %d: plan %d, %v; want %d, true", c.n, i, plan, ok, i%7)
			}
		}
		for i := c.n; i < c.n+1000; i++ {
			if plan, ok := x.lookup(sum(i)); ok {
				t.Fatalf("%d entries: sum %d not in the index found, plan %d", c.n, i, plan)
			}
		}
	}
}
