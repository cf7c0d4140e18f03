package forwardauth_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/rlproxytest"
)

const basic = `
forward_auth: {listen: "127.0.0.1:0"}
real_ip: {trusted_proxies: [127.0.0.1/32]}
upstreams: {app: {builtin: echo}}
policies:
  api: {algorithm: token_bucket, rate: 3r/m, burst: 3}
  keyed: {algorithm: token_bucket, rate: 2r/m, burst: 2, key: "header:X-API-Key"}
routes:
  - {name: login, match: {host: api.example, path: /login, methods: [POST]}, upstream: app, policies: [keyed]}
  - {name: api, match: {path_prefix: /api/}, upstream: app, policies: [api]}
  - {name: free, match: {path_prefix: /free/}, upstream: app}
`

// TestUntrustedCallerIsNeverDecided: a caller outside trusted_proxies gets
// 403 problem+json and charges nothing.
func TestUntrustedCallerIsNeverDecided(t *testing.T) {
	in, fa := start(t, basic)
	other := rlproxytest.ClientFrom("127.0.0.2")
	for range 5 {
		resp, body := ask(t, other, fa+"/auth", "X-Original-URI", "/api/x")
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Content-Type") != "application/problem+json" ||
			!strings.Contains(body, "urn:rlproxy:problem:untrusted-caller") {
			t.Fatalf("untrusted caller: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if resp.Header.Get("RateLimit") != "" {
			t.Fatalf("untrusted caller got quota headers: %v", resp.Header)
		}
	}
	if n := requests(t, in.Metrics(t), "api", "api", "allowed"); n != 0 {
		t.Fatalf("untrusted callers were decided: allowed=%v", n)
	}
	// The trusted caller still finds the whole burst.
	resp, _ := ask(t, nil, fa+"/auth", "X-Original-URI", "/api/x")
	if got := resp.Header.Get("RateLimit"); resp.StatusCode != 200 || got != `"api";r=2;t=20` {
		t.Fatalf("first trusted decision: %d RateLimit %q", resp.StatusCode, got)
	}
}

// TestDescribedRequest: the verdict is about the described request
// (Traefik/Caddy headers, then nginx's), never the forward-auth request's
// own path; the client comes from X-Forwarded-For of the trusted caller.
func TestDescribedRequest(t *testing.T) {
	in, fa := start(t, basic)
	// Traefik/Caddy style; the key source reads the original's header.
	traefik := []string{"X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/login?x=1", "X-Forwarded-Host", "api.example", "X-API-Key", "k1"}
	for i, want := range []int{200, 200, 429} {
		resp, body := ask(t, nil, fa+"/api/ignored", traefik...)
		if resp.StatusCode != want {
			t.Fatalf("login #%d: %d %s", i+1, resp.StatusCode, body)
		}
		if want == 200 && body != "" {
			t.Fatalf("allowed answer has a body: %q", body)
		}
	}
	// Another API key is another client; a GET does not match the route.
	if resp, _ := ask(t, nil, fa+"/", append(traefik[:len(traefik)-1:len(traefik)-1], "k2")...); resp.StatusCode != 200 || resp.Header.Get("RateLimit") != `"keyed";r=1;t=30` {
		t.Fatalf("other key: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, _ := ask(t, nil, fa+"/", "X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/login", "X-Forwarded-Host", "api.example", "X-API-Key", "k1"); resp.StatusCode != 200 || resp.Header.Get("RateLimit") != "" {
		t.Fatalf("GET /login matched the POST route: %d %v", resp.StatusCode, resp.Header)
	}
	// nginx style, and the client from X-Forwarded-For: each address its own bucket.
	for _, ip := range []string{"192.0.2.1", "192.0.2.2"} {
		resp, _ := ask(t, nil, fa+"/", "X-Original-Method", "GET", "X-Original-URI", "/api/v1", "X-Forwarded-For", ip)
		if got := resp.Header.Get("RateLimit"); got != `"api";r=2;t=20` {
			t.Fatalf("client %s: RateLimit %q", ip, got)
		}
	}
	// Unlimited and unmatched requests pass without headers; no URI is a 400.
	for _, uri := range []string{"/free/x", "/elsewhere"} {
		if resp, _ := ask(t, nil, fa+"/", "X-Original-URI", uri); resp.StatusCode != 200 || resp.Header.Get("RateLimit-Policy") != "" {
			t.Fatalf("%s: %d %v", uri, resp.StatusCode, resp.Header)
		}
	}
	if resp, body := ask(t, nil, fa+"/api/x"); resp.StatusCode != 400 || !strings.Contains(body, "no-original-request") {
		t.Fatalf("no URI: %d %s", resp.StatusCode, body)
	}
	if n := requests(t, in.Metrics(t), "login", "keyed", "rejected"); n != 1 {
		t.Fatalf("rlproxy_requests_total{route=login,decision=rejected} = %v, want 1", n)
	}
}

// TestRefusal: the refusal carries Retry-After, the quota headers and the
// problem body; refused_status changes only the status.
func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		cfg    string
		status int
	}{{basic, 429}, {strings.Replace(basic, `{listen: "127.0.0.1:0"}`, `{listen: "127.0.0.1:0", refused_status: 403}`, 1), 403}} {
		_, fa := start(t, tc.cfg)
		var resp *http.Response
		var body string
		for range 4 {
			resp, body = ask(t, nil, fa+"/", "X-Original-URI", "/api/x")
		}
		if resp.StatusCode != tc.status || resp.Header.Get("Retry-After") != "20" ||
			resp.Header.Get("RateLimit-Policy") != `"api";q=3;w=60` || resp.Header.Get("RateLimit") != `"api";r=0;t=60` {
			t.Fatalf("refusal: %d %v", resp.StatusCode, resp.Header)
		}
		var p struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
			Policy string `json:"policy"`
		}
		if err := json.Unmarshal([]byte(body), &p); err != nil || p.Type != "urn:rlproxy:problem:rate-limited" || p.Status != 429 || p.Policy != "api" {
			t.Fatalf("problem body %s (%v)", body, err)
		}
	}
}

// TestStoreDownDeny: a fail-closed policy whose store is unreachable
// answers 503; a fail-open one allows.
func TestStoreDownDeny(t *testing.T) {
	dead := netutil.FreeAddr(t) // nothing listens there
	_, fa := start(t, `
forward_auth: {listen: "127.0.0.1:0"}
real_ip: {trusted_proxies: [127.0.0.1/32]}
store: {type: valkey, valkey: {addrs: ["`+dead+`"], timeout: 100ms}}
upstreams: {app: {builtin: echo}}
policies:
  closed: {algorithm: fixed_window, limit: 3, window: 1h, on_store_error: deny}
  open: {algorithm: fixed_window, limit: 3, window: 1h}
routes:
  - {name: closed, match: {path: /closed}, upstream: app, policies: [closed]}
  - {name: open, match: {path: /open}, upstream: app, policies: [open]}
`)
	if resp, body := ask(t, nil, fa+"/", "X-Original-URI", "/closed"); resp.StatusCode != 503 || !strings.Contains(body, "limiter-unavailable") {
		t.Fatalf("deny while the store is down: %d %s", resp.StatusCode, body)
	}
	if resp, _ := ask(t, nil, fa+"/", "X-Original-URI", "/open"); resp.StatusCode != 200 {
		t.Fatalf("allow while the store is down: %d", resp.StatusCode)
	}
}

// TestLeakyBucketWait: an accepted wait is served by waiting before the
// 200; a wait beyond server.max_wait is refused at once.
func TestLeakyBucketWait(t *testing.T) {
	_, fa := start(t, `
forward_auth: {listen: "127.0.0.1:0"}
real_ip: {trusted_proxies: [127.0.0.1/32]}
server: {max_wait: 700ms}
upstreams: {app: {builtin: echo}}
policies:
  shape: {algorithm: leaky_bucket, rate: 2r/s, burst: 5}
routes:
  - {name: shape, upstream: app, policies: [shape]}
`)
	// 2 r/s: after a first request, two at once wait 500 ms and 1000 ms.
	if resp, _ := ask(t, nil, fa+"/", "X-Original-URI", "/x"); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	type answer struct {
		status int
		took   time.Duration
	}
	ch := make(chan answer, 2)
	for range 2 {
		go func() {
			req, _ := http.NewRequest(http.MethodGet, fa+"/", nil)
			req.Header.Set("X-Original-URI", "/x")
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				ch <- answer{}
				return
			}
			resp.Body.Close()
			ch <- answer{resp.StatusCode, time.Since(start)}
		}()
	}
	a, b := <-ch, <-ch
	if a.status == 429 {
		a, b = b, a
	}
	// The refusal comes at once, the accepted one after its wait.
	if a.status != 200 || a.took < 400*time.Millisecond || b.status != 429 || b.took > 400*time.Millisecond {
		t.Fatalf("two at once: %+v and %+v, want 200 after ≥ 400ms and 429 at once", a, b)
	}
}

// TestConcurrencyLeaseReleased: with the proxy listener on, a concurrency
// policy is accepted, and its lease ends with the decision (nothing tells
// the listener when the request ends), so it never holds a slot.
func TestConcurrencyLeaseReleased(t *testing.T) {
	_, fa := start(t, `
forward_auth: {listen: "127.0.0.1:0"}
real_ip: {trusted_proxies: [127.0.0.1/32]}
upstreams: {app: {builtin: echo}}
policies:
  pool: {algorithm: concurrency, limit: 1}
routes:
  - {name: pool, upstream: app, policies: [pool]}
`)
	for i := range 3 {
		if resp, body := ask(t, nil, fa+"/", "X-Original-URI", "/x"); resp.StatusCode != 200 {
			t.Fatalf("decision %d: %d %s (a lease leaked)", i+1, resp.StatusCode, body)
		}
	}
}

// TestDescribedRequestReadAsProxy: the described request is read as the
// proxy reads its own: a respelled path and Host match their route, and
// what the proxy refuses with 400 — a path above the root, a target that
// is not a path, a lower-case method, a credential sent twice — is
// refused here too, counted in rlproxy_bad_requests_total.
func TestDescribedRequestReadAsProxy(t *testing.T) {
	in, fa := start(t, basic)
	resp, body := ask(t, nil, fa+"/", "X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/x/..//%6cogin", "X-Forwarded-Host", "API.example.", "X-API-Key", "k9")
	if resp.StatusCode != 200 || resp.Header.Get("RateLimit") != `"keyed";r=1;t=30` {
		t.Fatalf("respelled /login: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	for _, c := range []struct {
		name   string
		header []string
	}{
		{"path", []string{"X-Original-URI", "/../../etc/passwd"}},
		{"target", []string{"X-Original-URI", "x:admin/x"}},
		{"method", []string{"X-Forwarded-Method", "post", "X-Forwarded-Uri", "/login", "X-Forwarded-Host", "api.example"}},
		{"duplicate_credential", []string{"X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/login", "X-Forwarded-Host", "api.example", "X-API-Key", "decoy", "X-API-Key", "k9"}},
	} {
		resp, body := ask(t, nil, fa+"/", c.header...)
		if resp.StatusCode != 400 || !strings.Contains(body, "urn:rlproxy:problem:bad-request") {
			t.Errorf("%s: %d %s, want 400 bad-request", c.name, resp.StatusCode, body)
		}
	}
	got := map[string]float64{}
	for _, m := range in.Metrics(t)["rlproxy_bad_requests_total"].GetMetric() {
		if v := m.GetCounter().GetValue(); v > 0 {
			got[m.GetLabel()[0].GetValue()] = v
		}
	}
	if want := map[string]float64{"path": 1, "target": 1, "method": 1, "duplicate_credential": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rlproxy_bad_requests_total %v, want %v", got, want)
	}
}
