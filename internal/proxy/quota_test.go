package proxy_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestQuotaMethodNotAllowed: the quota endpoint refuses a POST as every
// other answer rlproxy gives in its own name, problem+json, with Allow.
func TestQuotaMethodNotAllowed(t *testing.T) {
	app := benchAppT(t, fmt.Sprintf(benchConfigHead, "http://127.0.0.1:1")+benchPolicy+"quota_endpoint: { path: /rate-limit }\n")
	w := httptest.NewRecorder()
	app.Handler().ServeHTTP(w, httptest.NewRequest("POST", "/rate-limit", nil))
	var body struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" ||
		w.Header().Get("Content-Type") != "application/problem+json" ||
		body.Type != "urn:rlproxy:problem:method-not-allowed" || body.Status != 405 {
		t.Errorf("POST: %d %v %s", w.Code, w.Header(), w.Body.String())
	}
}

// TestQuotaEndpointSpellings: the quota endpoint answers its path in every
// spelling routes match as that path (the upstream, unreachable here, is
// never asked), and a spelling refused with 400 stays refused.
func TestQuotaEndpointSpellings(t *testing.T) {
	app := benchAppT(t, fmt.Sprintf(benchConfigHead, "http://127.0.0.1:1")+benchPolicy+"quota_endpoint: { path: /rate-limit }\n")
	for _, c := range []struct {
		target string
		want   int
	}{{"/rate-limit", 200}, {"//rate-limit", 200}, {"/x/../rate-%6Cimit", 200}, {"/../rate-limit", 400}} {
		w := httptest.NewRecorder()
		app.Handler().ServeHTTP(w, httptest.NewRequest("GET", c.target, nil))
		if w.Code != c.want || c.want == 200 && w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %v, want %d", c.target, w.Code, w.Header(), c.want)
		}
	}
}

// TestQuotaForPath: with ?path= the answer is the route that path would
// take, so its top-level figures are that route's binding policy, not the
// tightest policy of another route; a path a request could not carry is
// 400, and a path no route takes lists nothing.
func TestQuotaForPath(t *testing.T) {
	app := benchAppT(t, fmt.Sprintf(benchConfigHead, "http://127.0.0.1:1")+`
policies:
  login: { algorithm: fixed_window, limit: 3, window: 1m, key: ip }
  api: { algorithm: fixed_window, limit: 100, window: 1m, key: ip }
routes:
  - { name: login, match: { path_prefix: /login, methods: [POST] }, upstream: app, policies: [login] }
  - { name: api, match: { path_prefix: /api/ }, upstream: app, policies: [api] }
quota_endpoint: { path: /rate-limit }
`)
	for _, c := range []struct {
		query    string
		code     int
		limit    int
		policies string // for a 400: a part of its detail
	}{
		{"", 200, 3, "login,api"},
		{"?path=/api/x", 200, 100, "api"},
		{"?path=/login&method=POST", 200, 3, "login"},
		{"?path=/login", 200, 0, ""}, // a GET takes no limited route
		{"?path=/x/../api/%79", 200, 100, "api"},
		{"?path=/../api/x", 400, 0, "climbs above the root"},
		{"?path=api/x", 400, 0, "want ?path=/PATH"},
		{"?path=/api/x&method=get", 400, 0, "lower-case"},
		{"?path=/api/x%zz", 400, 0, "want ?path=/PATH"},
		{"?method=POST", 400, 0, "want ?path=/PATH"},
	} {
		w := httptest.NewRecorder()
		app.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/rate-limit"+c.query, nil))
		var body struct {
			Detail   string `json:"detail"`
			Limit    int    `json:"limit"`
			Policies []struct {
				Name string `json:"name"`
			} `json:"policies"`
		}
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		var names []string
		for _, p := range body.Policies {
			names = append(names, p.Name)
		}
		if w.Code != c.code || c.code == 200 && (body.Limit != c.limit || strings.Join(names, ",") != c.policies) ||
			c.code == 400 && !strings.Contains(body.Detail, c.policies) {
			t.Errorf("%q: %d limit %d policies %v, want %d limit %d policies %q (%s)", c.query, w.Code, body.Limit, names, c.code, c.limit, c.policies, w.Body.String())
		}
	}
}
