package e2e

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/nginxtest"
	"rlproxy/internal/testutil/rlproxytest"
)

// TestForwardingAliasesDropped: a client's "_" spellings of the fields the
// upstream gets from the proxy alone (X_Real_IP, X_Forwarded_For, ...) —
// read as those fields by an upstream that reads fields CGI-style
// (HTTP_X_REAL_IP), so the client would forge the address the upstream
// sees — never reach the upstream, through rlproxy as through nginx
// (which drops every field with "_" by default); X-Real-Ip is the peer's.
// rlproxy forwards other fields with "_" (X_Under).
func TestForwardingAliasesDropped(t *testing.T) {
	up := newRawUpstream(t)
	rl := rlproxytest.Start(t, fmt.Sprintf("upstreams: { app: { url: \"http://%s\" } }\nroutes: [ { name: all, upstream: app } ]\n", up.addr()))
	ng := nginxtest.Start(t, fmt.Sprintf(`
    server {
        listen {{listen}};
        location / { proxy_pass http://%s; proxy_set_header X-Real-IP $remote_addr; }
    }`, up.addr()))
	const raw = "GET /alias HTTP/1.1\r\nHost: h\r\nX-Case: %s\r\nX-Real-IP: 10.9.9.9\r\nX_Real_IP: 10.6.6.6\r\n" +
		"X_Forwarded_For: 10.7.7.7\r\nx_forwarded_host: evil\r\nX_FORWARDED_PROTO: https\r\nX_Forwarded: 1\r\n" +
		"X_Under: kept\r\nConnection: close\r\n\r\n"
	for _, target := range []struct{ name, addr string }{
		{"rlproxy", strings.TrimPrefix(rl.URL, "http://")},
		{"nginx", ng.Addr},
	} {
		c, err := net.Dial("tcp", target.addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(c, raw, target.name); err != nil {
			t.Fatal(err)
		}
		resp, _ := io.ReadAll(c)
		c.Close()
		if !strings.HasPrefix(string(resp), "HTTP/1.1 200 ") {
			t.Fatalf("%s: answered %q, want 200", target.name, resp)
		}
		reqs := up.take(target.name)
		if len(reqs) != 1 {
			t.Fatalf("%s: upstream got %d requests, want 1", target.name, len(reqs))
		}
		for _, h := range reqs[0].headers {
			name, _, _ := strings.Cut(h, ":")
			if strings.Contains(name, "_") && !strings.EqualFold(name, "X_Under") {
				t.Errorf("%s: upstream got %q", target.name, h)
			}
		}
		if v, _ := reqs[0].header("X-Real-Ip"); v != "127.0.0.1" {
			t.Errorf("%s: upstream got X-Real-Ip %q, want 127.0.0.1", target.name, v)
		}
		if _, ok := reqs[0].header("X_Under"); ok != (target.name == "rlproxy") {
			t.Errorf("%s: X_Under forwarded %v, want %v", target.name, ok, target.name == "rlproxy")
		}
	}
}

// TestHeadLimitedAsGet: on a route limited for GET (burst 1), a HEAD after
// the one GET allowed is refused (429), not forwarded: the upstream would
// run the GET handler for it, and its status would tell the answer.
func TestHeadLimitedAsGet(t *testing.T) {
	e2eAwayFromBoundary(t, time.Hour, time.Minute)
	up := newRawUpstream(t)
	rl := rlproxytest.Start(t, fmt.Sprintf(`upstreams: { app: { url: "http://%s" } }
policies: { p: { algorithm: token_bucket, rate: 1r/h, burst: 1, key: ip } }
routes:
  - { name: get, match: { path_prefix: /g, methods: [GET] }, upstream: app, policies: [p] }
  - { name: all, upstream: app }
`, up.addr()))
	for i, c := range []struct{ raw, want string }{
		{"GET /g HTTP/1.1\r\nHost: h\r\nX-Case: head\r\nConnection: close\r\n\r\n", "HTTP/1.1 200 "},
		{"HEAD /g HTTP/1.1\r\nHost: h\r\nX-Case: head\r\nConnection: close\r\n\r\n", "HTTP/1.1 429 "},
	} {
		c2, err := net.Dial("tcp", strings.TrimPrefix(rl.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_ = c2.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(c2, c.raw)
		resp, _ := io.ReadAll(c2)
		c2.Close()
		if !strings.HasPrefix(string(resp), c.want) {
			t.Errorf("request %d: answered %q, want %q", i, firstLine(string(resp)), c.want)
		}
	}
	if n := len(up.take("head")); n != 1 {
		t.Errorf("upstream got %d requests, want 1 (the GET)", n)
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\r\n"); return l }
