package proxy_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
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
