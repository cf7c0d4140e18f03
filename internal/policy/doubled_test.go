package policy

import (
	"net/http/httptest"
	"strings"
	"testing"

	"rlproxy/internal/config"
	"rlproxy/internal/store/memory"
)

// TestRouteDoubled: a route refuses a credential sent twice when any key
// spec its requests are keyed by reads it — its policies', its plan
// key's, its plan policies' — and only then.
func TestRouteDoubled(t *testing.T) {
	t.Parallel()
	cfg, err := config.ParseWith("doubled.yaml", []byte(`
upstreams: { app: { url: "http://127.0.0.1:1" } }
policies:
  byheader: { algorithm: fixed_window, limit: 10, window: 1m, key: "header:X-Tenant" }
  bycookie: { algorithm: fixed_window, limit: 10, window: 1m, key: "cookie:sid" }
  byip: { algorithm: fixed_window, limit: 10, window: 1m }
plans:
  tiers: { key: "query:key", default: free, plans: { free: [byip], pro: [bycookie] }, keys: { k: pro } }
routes:
  - { name: header, upstream: app, policies: [byheader], match: { path: /header } }
  - { name: plan, upstream: app, plan: tiers, match: { path: /plan } }
  - { name: open, upstream: app }
`), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(cfg, Options{Store: memory.New(memory.Options{SweepInterval: -1})})
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string]*Route{}
	for _, rt := range l.Routes() {
		routes[rt.Name] = rt
	}
	for _, tc := range []struct {
		route, target string
		headers       []string
		want          bool
	}{
		{"header", "/?key=a&key=b", []string{"Cookie: sid=1; sid=2"}, false},
		{"header", "/", []string{"X-Tenant: a", "X-Tenant: b"}, true},
		{"plan", "/?key=a&key=b", nil, true},
		{"plan", "/", []string{"Cookie: sid=1; sid=2"}, true}, // a plan policy's key
		{"plan", "/", []string{"X-Tenant: a", "X-Tenant: b"}, false},
		{"open", "/?key=a&key=b", []string{"X-Tenant: a", "X-Tenant: b", "Cookie: sid=1; sid=2"}, false},
	} {
		r := httptest.NewRequest("GET", tc.target, nil)
		for _, h := range tc.headers {
			k, v, _ := strings.Cut(h, ": ")
			r.Header.Add(k, v)
		}
		if got := routes[tc.route].Doubled(view(r)); got != tc.want {
			t.Errorf("%s %s %v: Doubled = %v, want %v", tc.route, tc.target, tc.headers, got, tc.want)
		}
	}
}
