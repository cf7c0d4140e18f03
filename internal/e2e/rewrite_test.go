package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"rlproxy/internal/testutil/nginxtest"
	"rlproxy/internal/testutil/rlproxytest"
)

// rewriteRoutes puts each feature behind its own Host: rewrite.test
// (rewrite, as nginx's location /api/ and = /api with proxy_pass
// http://UP/prefix/), strip.test and strip2.test (strip_prefix, the URL's
// /prefix/ after it), root.test (location /api with proxy_pass http://UP/,
// whose "//x" nginx forwards as it is), "*.example.com" (everything to
// /wild/), and a catch-all (everything to /other/).
const rewriteRoutes = `
upstreams:
  bare: { url: "http://%[1]s" }
  based: { url: "http://%[1]s/prefix/" }
routes:
  - { name: rw-exact, match: { host: rewrite.test, path: /api }, upstream: bare, rewrite: /prefix/ }
  - { name: rw, match: { host: rewrite.test, path_prefix: /api/ }, upstream: bare, rewrite: /prefix/ }
  - { name: strip, match: { host: strip.test, path_prefix: /api }, upstream: based, strip_prefix: /api }
  - { name: strip2, match: { host: strip2.test, path_prefix: /api/ }, upstream: based, strip_prefix: /api/ }
  - { name: strip2-exact, match: { host: strip2.test, path: /api }, upstream: based, strip_prefix: /api }
  - { name: root, match: { host: root.test, path_prefix: /api }, upstream: bare, rewrite: / }
  - { name: wild, match: { host: "*.example.com" }, upstream: bare, rewrite: /wild/ }
  - { name: other, upstream: bare, rewrite: /other/ }
`

// rewriteNginx is the nginx side: the reference for every Host above.
const rewriteNginx = `
    server {
        listen {{listen}};
        server_name rewrite.test strip.test strip2.test;
        location /api/ { proxy_pass http://%[1]s/prefix/; }
        location = /api { proxy_pass http://%[1]s/prefix/; }
    }
    server {
        listen {{listen}};
        server_name root.test;
        location /api { proxy_pass http://%[1]s/; }
    }
    server {
        listen {{listen}};
        server_name *.example.com;
        location / { proxy_pass http://%[1]s/wild/; }
    }
    server {
        listen {{listen}} default_server;
        server_name _;
        location / { proxy_pass http://%[1]s/other/; }
    }`

// rewriteTargets are the request targets sent to both: the cases of the
// operator's guide and the spellings that exercise normalizing and
// re-escaping.
var rewriteTargets = []string{
	"/api/x", "/api/x?q=1", "/api/./x", "/api//x", "/api/%7Ex", "/api/a%2Fb", "/api",
	"/api/", "/api/x?", "/api%2Fx", "/api/b/../c", "/api/a%20b", "/api/%C3%A9", "/api/x?a=%20&b=/c",
	"/api/a;b=c", "/%61pi/x", "/api/.%2e/api/y", "/api//a%3Fb", "/api/x%3F", "/api/a\"b?x=%20", "/api//a\"b",
	"/api/a\"b%41", "/api//\xc3\xa9", "/api/\xc3\xa9?%41", "/api/<>^`{|}\\x", "/api/<>^`{|}\\x%41",
}

// TestRewriteAgainstNginx sends each target, on each Host, to a real
// nginx and to rlproxy in front of one raw upstream, and wants the
// upstream to receive the same request-target from both, byte for byte:
// rewrite as nginx's proxy_pass with a URI, strip_prefix as the same
// location with the prefix in the upstream's URL, and "*.example.com"
// chosen for exactly the Hosts nginx's server_name *.example.com takes.
func TestRewriteAgainstNginx(t *testing.T) {
	up := newRawUpstream(t)
	in := rlproxytest.Start(t, fmt.Sprintf(rewriteRoutes, up.addr()))
	ng := nginxtest.Start(t, fmt.Sprintf(rewriteNginx, up.addr()))
	rl := strings.TrimPrefix(in.URL, "http://")

	type send struct{ host, target string }
	var sends []send
	for _, h := range []string{"rewrite.test", "strip.test", "strip2.test"} {
		for _, target := range rewriteTargets {
			sends = append(sends, send{h, target})
		}
	}
	for _, target := range []string{"/api/x", "/api", "/apix", "/api//x?q", "/api/%2Fx"} {
		sends = append(sends, send{"root.test", target})
	}
	for _, target := range []string{"http://rewrite.test/api/x?q=1", "http://rewrite.test/api/./a%20b", "http://strip.test/api", "http://a.b.example.com/x", "http://rewrite.test/api/a\"b", "http://a.example.com?q=1"} {
		sends = append(sends, send{"other.test", target}) // absolute form: its host is the request's
	}
	for _, h := range []string{"a.example.com", "a.b.example.com", "example.com", "A.EXAMPLE.COM.", "xexample.com", "a.example.com:80", "example.com.", "a.example.co"} {
		sends = append(sends, send{h, "/x?y=1"})
	}
	for _, s := range sends {
		name := s.host + " " + s.target
		raw := "GET " + s.target + " HTTP/1.1\r\nHost: " + s.host + "\r\n\r\n"
		ngStatus, _ := bypassH1(t, ng.Addr, nil, bypassCase{name: "nginx " + name, h1: raw})
		rlStatus, _ := bypassH1(t, rl, nil, bypassCase{name: "rlproxy " + name, h1: raw})
		want, got := rewriteTarget(up.take("nginx "+name)), rewriteTarget(up.take("rlproxy "+name))
		if ngStatus != 200 || rlStatus != 200 || got != want {
			t.Errorf("Host %s, %s: upstream got %q from rlproxy (%d), %q from nginx (%d)", s.host, s.target, got, rlStatus, want, ngStatus)
		}
	}
}

// rewriteTarget is the request-target of the one request in reqs ("" when
// there is none, "<n requests>" when several).
func rewriteTarget(reqs []rawRequest) string {
	if len(reqs) != 1 {
		return fmt.Sprintf("<%d requests>", len(reqs))
	}
	parts := strings.Split(reqs[0].line, " ")
	if len(parts) != 3 {
		return "<request line " + reqs[0].line + ">"
	}
	return parts[1]
}

// TestEchoShowsUpstreamRequest: the built-in echo upstream describes the
// request a real upstream receives, through the same rewriter: the
// route's rewritten path and query, the Host the upstream's host mode
// sends, X-Forwarded-Host and -Proto, X-Real-IP, the X-Request-Id
// rlproxy set (access log on) and the upstream's request_headers.
func TestEchoShowsUpstreamRequest(t *testing.T) {
	in := rlproxytest.Start(t, fmt.Sprintf(`
log: { access: { path: %q } }
upstreams:
  demo: { builtin: echo, request_headers: { set: { X-Env: test } } }
  pinned: { builtin: echo, host: app.internal }
routes:
  - { name: pinned, match: { path_prefix: /pinned/ }, upstream: pinned, strip_prefix: /pinned }
  - { name: api, match: { path_prefix: /api/ }, upstream: demo, rewrite: /v2/ }
`, filepath.Join(t.TempDir(), "access.log")))
	type echo struct {
		Path    string            `json:"path"`
		Query   string            `json:"query"`
		Headers map[string]string `json:"headers"`
	}
	get := func(target string) echo {
		t.Helper()
		resp, body := rlproxytest.Get(t, nil, in.URL+target)
		var e echo
		if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: status %d, body %q: %v", target, resp.StatusCode, body, err)
		}
		return e
	}
	e := get("/api/a%2Fb/./c?q=%20")
	h := e.Headers
	host := strings.TrimPrefix(in.URL, "http://")
	if e.Path != "/v2/a/b/c" || e.Query != "q=%20" || h["Host"] != host || h["X-Forwarded-Host"] != host ||
		h["X-Forwarded-Proto"] != "http" || h["X-Real-Ip"] != "127.0.0.1" || h["X-Forwarded-For"] != "127.0.0.1" ||
		len(h["X-Request-Id"]) != 32 || h["X-Env"] != "test" {
		t.Errorf("echo = %+v; want path /v2/a/b/c, query q=%%20, Host and X-Forwarded-Host %s, X-Forwarded-Proto http, X-Real-Ip 127.0.0.1, a 32-hex X-Request-Id, X-Env test", e, host)
	}
	if e := get("/pinned/x"); e.Path != "/x" || e.Headers["Host"] != "app.internal" || e.Headers["X-Forwarded-Host"] != host {
		t.Errorf("echo = %+v; want path /x, Host app.internal, X-Forwarded-Host %s", e, host)
	}
}
