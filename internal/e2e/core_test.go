// Package e2e holds end-to-end tests: a real rlproxy (the production
// wiring of package server) over loopback HTTP, in front of a real
// upstream, on the memory store and on a real redis-server.
package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/fakeclock"
	"rlproxy/internal/testutil/rlproxytest"
)

// TestReferenceAPI is docs/PRODUCT.md's small API: a token bucket of 5, one token
// per 2 s, per client IP. Seven quick requests give 200×5 then 429×2 with
// Retry-After: 2 and the draft headers; 4 s later a request passes again.
func TestReferenceAPI(t *testing.T) {
	for _, st := range e2eStores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			// Injected time: the decisions are made at clk's time, so the
			// 4 s refill is an Advance, not a sleep.
			clk := fakeclock.New(time.Now())
			up := rlproxytest.NewUpstream(t)
			in := rlproxytest.Start(t, storeYAML(t, st)+fmt.Sprintf(`
upstreams: { app: { url: %q } }
policies:
  api: { algorithm: token_bucket, rate: 30r/m, burst: 5, key: ip }
routes:
  - { name: api, match: { path_prefix: /api/ }, upstream: app, policies: [api] }
`, up.URL), rlproxytest.WithNow(clk.Now))
			var codes []int
			var last *http.Response
			for range 7 {
				resp, _ := rlproxytest.Get(t, nil, in.URL+"/api/items")
				codes = append(codes, resp.StatusCode)
				last = resp
			}
			if fmt.Sprint(codes) != "[200 200 200 200 200 429 429]" {
				t.Fatalf("statuses %v, want [200 200 200 200 200 429 429]", codes)
			}
			for h, want := range map[string]string{
				"Retry-After":      "2",
				"RateLimit-Policy": `"api";q=5;w=10`,
				"RateLimit":        `"api";r=0;t=10`,
				"Cache-Control":    "no-store",
				"Content-Type":     "application/problem+json",
			} {
				if got := last.Header.Get(h); got != want {
					t.Errorf("429 %s = %q, want %q", h, got, want)
				}
			}
			if up.Count() != 5 {
				t.Errorf("upstream saw %d requests, want 5 (refusals never reach it)", up.Count())
			}
			clk.Advance(4 * time.Second) // two tokens back, exactly
			resp, _ := rlproxytest.Get(t, nil, in.URL+"/api/items")
			if resp.StatusCode != 200 {
				t.Fatalf("after 4 s: status %d, want 200", resp.StatusCode)
			}
			// ~2 tokens back, one spent: one left, full again in ~8 s.
			if got := resp.Header.Get("RateLimit"); got != `"api";r=1;t=8` {
				t.Errorf("RateLimit after 4 s = %q, want %q", got, `"api";r=1;t=8`)
			}
		})
	}
}

// TestEchoUpstream: the built-in echo upstream answers with the request as
// an upstream would receive it — X-Forwarded-For already rewritten (an
// untrusted client's own header dropped), Host, X-Forwarded-Host and
// -Proto, and the X-Request-Id the access log's id travels in.
func TestEchoUpstream(t *testing.T) {
	in := rlproxytest.Start(t, `
log: { access: { path: access.log } }
upstreams: { demo: { builtin: echo } }
routes:
  - { name: all, upstream: demo }
`)
	resp, body := rlproxytest.Get(t, nil, in.URL+"/hello?x=1", "X-Forwarded-For", "1.2.3.4", "X-Request-Id", "req-42")
	var got struct {
		Echo    bool              `json:"echo"`
		Path    string            `json:"path"`
		Query   string            `json:"query"`
		Headers map[string]string `json:"headers"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d, body %q: %v", resp.StatusCode, body, err)
	}
	if !got.Echo || got.Path != "/hello" || got.Query != "x=1" || got.Headers["X-Forwarded-For"] != "127.0.0.1" {
		t.Fatalf("echo = %+v, want path /hello, query x=1, X-Forwarded-For 127.0.0.1", got)
	}
	host := strings.TrimPrefix(in.URL, "http://")
	for name, want := range map[string]string{"Host": host, "X-Forwarded-Host": host, "X-Forwarded-Proto": "http", "X-Request-Id": "req-42", "X-Real-Ip": "127.0.0.1"} {
		if got.Headers[name] != want {
			t.Errorf("echo header %s = %q, want %q", name, got.Headers[name], want)
		}
	}
}
