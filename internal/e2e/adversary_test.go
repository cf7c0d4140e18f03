package e2e

import (
	"fmt"
	"strings"
	"testing"

	"rlproxy/internal/testutil/rlproxytest"
)

// advStatuses sends n GETs to url and returns their status codes in order.
func advStatuses(t *testing.T, url string, n int) []int {
	t.Helper()
	out := make([]int, n)
	for i := range out {
		resp, _ := rlproxytest.Get(t, nil, url)
		out[i] = resp.StatusCode
	}
	return out
}

// TestAdvReloadOfUnusedStoreFieldsKeepsMemoryState: a memory store depends
// on type and max_keys only. A reload that changed any other store field
// (the unused valkey section, the breaker, key_hash_secret_env) once built a
// fresh memory store, so every client's spent budget was forgotten — a
// careless operator's edit reset all limits. State must survive it
// (docs/CONTRACT.md: state survives a reload unless the algorithm or key changes).
func TestAdvReloadOfUnusedStoreFieldsKeepsMemoryState(t *testing.T) {
	// Not parallel: t.Setenv.
	up := rlproxytest.NewUpstream(t)
	t.Setenv("ADV_HASH_SECRET_1", "adversary-secret-number-one")
	t.Setenv("ADV_HASH_SECRET_2", "adversary-secret-number-two")
	cfg := func(store string) string {
		return fmt.Sprintf(`store: %s
upstreams: { app: { url: %q } }
policies:
  a: { algorithm: sliding_log, limit: 3, window: 1h }
routes:
  - { name: r, match: { path: /r }, upstream: app, policies: [a] }
`, store, up.URL)
	}
	in := rlproxytest.Start(t, cfg("{ type: memory, max_keys: 5000 }"))
	if got := fmt.Sprint(advStatuses(t, in.URL+"/r", 4)); got != "[200 200 200 429]" {
		t.Fatalf("before reloads: %s, want [200 200 200 429]", got)
	}
	for i, store := range []string{
		"{ type: memory, max_keys: 5000, breaker: { failures: 9 } }",
		"{ type: memory, max_keys: 5000, breaker: { failures: 9 }, valkey: { timeout: 80ms } }",
		"{ type: memory, max_keys: 5000, key_hash_secret_env: ADV_HASH_SECRET_1 }",
		"{ type: memory, max_keys: 5000, key_hash_secret_env: ADV_HASH_SECRET_2 }",
	} {
		succ, _ := opsReloads(t, in)
		in.Rewrite(t, cfg(store))
		in.App.Reload("adversary")
		if s, f := opsReloads(t, in); s != succ+1 || f != 0 {
			t.Fatalf("reload %d (%s): success=%d failure=%d, want %d and 0", i, store, s, f, succ+1)
		}
		if got := fmt.Sprint(advStatuses(t, in.URL+"/r", 1)); got != "[429]" {
			t.Fatalf("after reload %d (%s): %s, want [429] (the spent budget is kept)", i, store, got)
		}
	}
	if up.Count() != 3 {
		t.Errorf("upstream saw %d requests, want 3", up.Count())
	}
}

// TestAdvPathSpellingsDoNotBypassRoutes: "//login", "/./login",
// "/x/../login" and "/%2e/login" once missed the limited /login route and
// went to the unlimited catch-all, while upstreams that normalize paths
// (nginx, most frameworks) serve them as /login — a limit bypass. Routes now
// match the normalized path: all are charged to login (limit 2, so the third
// and later are refused), and the upstream still gets the path as sent.
func TestAdvPathSpellingsDoNotBypassRoutes(t *testing.T) {
	t.Parallel()
	up := rlproxytest.NewUpstream(t)
	in := rlproxytest.Start(t, fmt.Sprintf(`upstreams: { app: { url: %q } }
policies:
  login: { algorithm: fixed_window, limit: 2, window: 1h }
routes:
  - { name: login, match: { path_prefix: /login }, upstream: app, policies: [login] }
  - { name: api, match: { path: /api/ }, upstream: app, policies: [login] }
  - { name: rest, match: { path_prefix: / }, upstream: app }
`, up.URL))
	var got []string
	for _, p := range []string{"//login", "/./login", "/x/../login", "/%2e/login", "/api/.", "/login/../free"} {
		resp, _ := rlproxytest.Get(t, nil, in.URL+p)
		got = append(got, fmt.Sprintf("%s:%d:%q", p, resp.StatusCode, resp.Header.Get("RateLimit")))
	}
	statuses := make([]string, len(got))
	for i, g := range got {
		statuses[i] = g[:strings.LastIndex(g, ":")]
		if i < 5 && !strings.Contains(g, `"\"login\";r=`) {
			t.Errorf("%s: no RateLimit member for login: the request missed the limited route", g)
		}
	}
	wantStatuses := []string{"//login:200", "/./login:200", "/x/../login:429", "/%2e/login:429", "/api/.:429", "/login/../free:200"}
	if fmt.Sprint(statuses) != fmt.Sprint(wantStatuses) {
		t.Fatalf("statuses %v, want %v (all %v)", statuses, wantStatuses, got)
	}
	if up.Count() != 3 {
		t.Fatalf("upstream saw %d requests, want 3", up.Count())
	}
	if uri := up.Requests()[0].RequestURI; uri != "//login" {
		t.Errorf("upstream got %q, want the path as sent, //login", uri)
	}
}
