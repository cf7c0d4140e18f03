package e2e

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/nginxtest"
	"rlproxy/internal/testutil/rlproxytest"
)

// bypassCase is one spelling of a request that once walked around a
// limited route (or reached the upstream in a form nginx refuses), as raw
// HTTP/1.1 bytes and as an HTTP/2 header block.
type bypassCase struct {
	name string
	// h1 is the raw request; "X-Case: name" is inserted after its request
	// line. "" when the case has no HTTP/1 form.
	h1 string
	// h2 is the header block as name, value pairs ("x-case" is added),
	// body its DATA; nil when the case has no HTTP/2 form.
	h2   []string
	body string
	// want is rlproxy's answer on every listener: 400 (refused before
	// routing, counted under reason) or 429 (the limited route took it).
	want   int
	reason string
	// h2Reset: on HTTP/2 net/http's server resets the stream before any
	// handler sees the request, which refuses it as well. h2Race: it may
	// reset the stream (a DATA frame longer than the length it read) while
	// rlproxy answers 400; either refuses it, and rlproxy counts it.
	h2Reset, h2Race bool
	// nginx is nginx 1.22's status for h1 in front of the same routes
	// (200 only where rlproxy is stricter by design: "fragment", nginx
	// cuts the path at "#" and serves /public from the catch-all).
	nginx int
}

// bypassRoutes are the limited routes plus the catch-all an operator
// writes. Every limited route shares the "spent" budget (one request an
// hour for everybody), which the test spends first: a later request that
// reaches a limited route is refused with 429, one that walks around it
// gets the catch-all's 200. "auth" is keyed by the Authorization header.
const bypassRoutes = `
upstreams: { app: { url: "http://%s" } }
policies:
  spent: { algorithm: fixed_window, limit: 1, window: 1h, key: global }
  perkey: { algorithm: fixed_window, limit: 1, window: 1h, key: "header:Authorization" }
routes:
  - { name: api, match: { host: api.test }, upstream: app, policies: [spent] }
  - { name: login, match: { path: /login, methods: [POST] }, upstream: app, policies: [spent] }
  - { name: exact, match: { path: /exact }, upstream: app, policies: [spent] }
  - { name: admin, match: { path_prefix: /admin }, upstream: app, policies: [spent] }
  - { name: etc, match: { path_prefix: /etc/ }, upstream: app, policies: [spent] }
  - { name: auth, match: { path_prefix: /auth }, upstream: app, policies: [perkey] }
  - { name: all, upstream: app }
`

// bypassNginx is the same routes as nginx locations: limit_req with a
// burst of 0 at 1 r/m, one zone for all the limited ones.
const bypassNginx = `
    limit_req_zone $binary_remote_addr zone=spent:1m rate=1r/m;
    limit_req_zone $http_authorization zone=perkey:1m rate=1r/m;
    limit_req_status 429;
    server {
        listen {{listen}};
        server_name api.test;
        location / { limit_req zone=spent; proxy_pass http://%[1]s; }
    }
    server {
        listen {{listen}} default_server;
        server_name _;
        location = /login { limit_req zone=spent; proxy_pass http://%[1]s; }
        location = /exact { limit_req zone=spent; proxy_pass http://%[1]s; }
        location /admin { limit_req zone=spent; proxy_pass http://%[1]s; }
        location /etc/ { limit_req zone=spent; proxy_pass http://%[1]s; }
        location /auth { limit_req zone=perkey; proxy_pass http://%[1]s; }
        location / { proxy_pass http://%[1]s; }
    }`

// h2Req is an HTTP/2 header block for method, authority and path.
func h2Req(method, authority, path string, more ...string) []string {
	return append([]string{":method", method, ":scheme", "http", ":authority", authority, ":path", path}, more...)
}

// bypassCases: the route-skip cases of the review, and spellings that
// must reach the limited route.
func bypassCases() []bypassCase {
	return []bypassCase{
		{name: "trailing-dot-host", h1: "GET /x HTTP/1.1\r\nHost: api.test.\r\n\r\n", h2: h2Req("GET", "api.test.", "/x"), want: 429, nginx: 429},
		{name: "upper-case-host-dot-port", h1: "GET /x HTTP/1.1\r\nHost: API.Test.:80\r\n\r\n", h2: h2Req("GET", "API.Test.:80", "/x"), want: 429, nginx: 429},
		{name: "lower-case-post", h1: "post /login HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", h2: h2Req("post", "h", "/login"), want: 400, reason: "method", nginx: 400},
		{name: "lower-case-get", h1: "get /exact HTTP/1.1\r\nHost: h\r\n\r\n", h2: h2Req("get", "h", "/exact"), want: 400, reason: "method", nginx: 400},
		{name: "scheme-no-authority", h1: "GET x:admin/x HTTP/1.1\r\nHost: h\r\n\r\n", h2: h2Req("GET", "h", "x:admin/x"), want: 400, reason: "target", nginx: 400},
		{name: "scheme-only", h1: "GET a:admin HTTP/1.1\r\nHost: h\r\n\r\n", h2: h2Req("GET", "h", "a:admin"), want: 400, reason: "target", nginx: 400},
		{name: "authority-form-get", h1: "GET other.test:80 HTTP/1.1\r\nHost: h\r\n\r\n", h2: h2Req("GET", "h", "other.test:80"), want: 400, reason: "target", nginx: 400},
		{name: "options-asterisk", h1: "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", h2: h2Req("OPTIONS", "h", "*"), want: 400, reason: "target", nginx: 400},
		{name: "userinfo", h1: "GET http://user:pw@api.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n", h2: h2Req("GET", "user:pw@api.test", "/"), want: 400, reason: "target", h2Reset: true, nginx: 400},
		{name: "absolute-form", h1: "GET http://api.test/x HTTP/1.1\r\nHost: other.test\r\n\r\n", want: 429, nginx: 429},
		{name: "duplicate-authorization", h1: "GET /auth HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer decoy\r\nAuthorization: Bearer real\r\n\r\n",
			h2: h2Req("GET", "h", "/auth", "authorization", "Bearer decoy", "authorization", "Bearer real"), want: 400, reason: "duplicate_credential", nginx: 400},
		{name: "dot-dot-above-root", h1: "GET /../../etc/passwd HTTP/1.1\r\nHost: h\r\n\r\n", h2: h2Req("GET", "h", "/../../etc/passwd"), want: 400, reason: "path", nginx: 400},
		{name: "escaped-dot-dot-above-root", h1: "GET /%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\nHost: h\r\n\r\n", h2: h2Req("GET", "h", "/%2e%2e/%2e%2e/etc/passwd"), want: 400, reason: "path", nginx: 400},
		{name: "escaped-nul", h1: "GET /exact%00 HTTP/1.1\r\nHost: h\r\n\r\n", h2: h2Req("GET", "h", "/exact%00"), want: 400, reason: "path", nginx: 400},
		{name: "escaped-letters", h1: "GET /%65xac%74 HTTP/1.1\r\nHost: h\r\n\r\n", h2: h2Req("GET", "h", "/%65xac%74"), want: 429, nginx: 429},
		{name: "escaped-slash-dots", h1: "GET /etc%2Fx%2F..%2F..%2Fadmin HTTP/1.1\r\nHost: h\r\n\r\n", h2: h2Req("GET", "h", "/etc%2Fx%2F..%2F..%2Fadmin"), want: 429, nginx: 429},
		{name: "dot-segments", h1: "GET /x/./..//exact HTTP/1.1\r\nHost: h\r\n\r\n", h2: h2Req("GET", "h", "/x/./..//exact"), want: 429, nginx: 429},
		{name: "empty-host", h1: "GET /x HTTP/1.1\r\nHost: \r\n\r\n", want: 400, reason: "host", nginx: 400},
		{name: "double-dot-host", h1: "GET /x HTTP/1.1\r\nHost: api..test\r\n\r\n", h2: h2Req("GET", "api..test", "/x"), want: 400, reason: "host", nginx: 400},
		{name: "method-with-digit", h1: "POST2 /login HTTP/1.1\r\nHost: h\r\n\r\n", h2: h2Req("POST2", "h", "/login"), want: 400, reason: "method", nginx: 400},
		{name: "fragment", h1: "GET /public#/../exact HTTP/1.1\r\nHost: h\r\n\r\n", h2: h2Req("GET", "h", "/public#/../exact"), want: 400, reason: "target", nginx: 200},
		{name: "path-with-space", h2: h2Req("GET", "h", "/exact HTTP/1.0"), want: 400, reason: "target"},
		{name: "path-with-control", h2: h2Req("GET", "h", "/exa\x01ct"), want: 400, reason: "target", h2Reset: true},
		{name: "unparsable-content-length", h2: h2Req("POST", "h", "/x", "content-length", "abc"), body: "hello", want: 400, reason: "content_length", h2Race: true},
		{name: "unparsable-content-length-no-body", h2: h2Req("POST", "h", "/x", "content-length", "-1"), want: 400, reason: "content_length"},
	}
}

// bypassListener is one way in: HTTP/1.1 or HTTP/2, plain or over TLS.
type bypassListener struct {
	name string
	h2   bool
	tls  bool
}

var bypassListeners = []bypassListener{{"plain", false, false}, {"tls", false, true}, {"h2c", true, false}, {"h2-tls", true, true}}

// TestBypassSpellings sends every bypassCase to real nginx and to rlproxy
// on each listener (plain and TLS HTTP/1.1, h2c and HTTP/2 over TLS), in
// front of one raw upstream: rlproxy refuses (400) or limits (429) each
// one — never the catch-all's 200 — as nginx does on HTTP/1.1, the
// upstream receives none of them, every request line it does receive is
// an origin-form one, each 400 on HTTP/1 closes the connection, and each
// 400 is counted once in rlproxy_bad_requests_total under its reason.
func TestBypassSpellings(t *testing.T) {
	e2eAwayFromBoundary(t, time.Hour, time.Minute)
	up := newRawUpstream(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	pool := x509.NewCertPool()
	pool.AddCert(opsCert(t, certFile, keyFile, 1))
	tlsCfg := &tls.Config{RootCAs: pool}
	routes := fmt.Sprintf(bypassRoutes, up.addr())
	plain := rlproxytest.Start(t, "server: { h2c: true }\n"+routes)
	secure := rlproxytest.Start(t, fmt.Sprintf("tls: { cert_file: %q, key_file: %q }\n", certFile, keyFile)+routes)
	ng := nginxtest.Start(t, fmt.Sprintf(bypassNginx, up.addr()))

	cases := bypassCases()
	bypassSpend(t, ng.Addr, nil, up)
	for _, c := range cases {
		if c.h1 == "" {
			continue
		}
		nc := c
		nc.name = "nginx " + c.name // what nginx forwards is not checked
		if got, _ := bypassH1(t, ng.Addr, nil, nc); got != c.nginx {
			t.Errorf("nginx %s: %d, want %d", c.name, got, c.nginx)
		}
	}
	want := map[*rlproxytest.Instance]map[string]int{plain: {}, secure: {}}
	for _, l := range bypassListeners {
		in, cfg := plain, (*tls.Config)(nil)
		if l.tls {
			in, cfg = secure, tlsCfg
		}
		addr := strings.TrimPrefix(strings.TrimPrefix(in.URL, "http://"), "https://")
		if !l.h2 { // once per instance: h2c and h2-tls come after
			bypassSpend(t, addr, cfg, up)
		}
		for _, c := range cases {
			var got int
			switch {
			case l.h2 && c.h2 != nil:
				got = h2Exchange(t, h2Dial(t, addr, cfg), h2Fields(append(c.h2, "x-case", c.name)...), c.body)
			case !l.h2 && c.h1 != "":
				var closed bool
				if got, closed = bypassH1(t, addr, cfg, c); got == 400 && !closed {
					t.Errorf("%s %s: 400 without Connection: close", l.name, c.name)
				}
			default:
				continue
			}
			switch {
			case got == c.want, got == h2Reset && l.h2 && (c.h2Reset || c.h2Race):
			default:
				t.Errorf("%s %s: %d, want %d (200: the limited route was walked around)", l.name, c.name, got, c.want)
			}
			if got == 400 || got == h2Reset && c.h2Race {
				want[in][c.reason]++
			}
		}
	}
	for _, c := range cases {
		if reqs := up.take(c.name); len(reqs) > 0 {
			t.Errorf("%s: the upstream received %q", c.name, reqs[0].line)
		}
	}
	for _, r := range up.take("spend") {
		if !originLine.MatchString(r.line) {
			t.Errorf("the upstream received request line %q, want origin form", r.line)
		}
	}
	for in, reasons := range want {
		bypassCounted(t, in, reasons)
	}
}

// originLine is a request line in origin form, split by exactly two
// spaces (nginx sends HTTP/1.0 upstream by default).
var originLine = regexp.MustCompile(`^[A-Z]+ /[^ ]* HTTP/1\.[01]$`)

// bypassSpend spends the limited routes' budgets on addr (over TLS when
// cfg is not nil; nginx's and each rlproxy's are their own): one request
// to /exact (the "spent" policy) and one with Authorization "Bearer real"
// (the "perkey" policy), both 200.
func bypassSpend(t *testing.T, addr string, cfg *tls.Config, up *rawUpstream) {
	t.Helper()
	for _, raw := range []string{
		"GET /exact HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /auth HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer real\r\n\r\n",
	} {
		if got, _ := bypassH1(t, addr, cfg, bypassCase{name: "spend", h1: raw}); got != 200 {
			t.Fatalf("%s: spending the budget: %d, want 200", addr, got)
		}
	}
}

// bypassH1 sends c.h1 on a new connection to addr (over TLS, ALPN
// http/1.1, when cfg is not nil) and returns the response status (0: none)
// and whether the response closes the connection.
func bypassH1(t *testing.T, addr string, cfg *tls.Config, c bypassCase) (int, bool) {
	t.Helper()
	var conn net.Conn
	var err error
	if cfg != nil {
		cfg = cfg.Clone()
		cfg.NextProtos = []string{"http/1.1"}
		conn, err = tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	} else {
		conn, err = net.DialTimeout("tcp", addr, 5*time.Second)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	line, rest, _ := strings.Cut(c.h1, "\r\n")
	if _, err := io.WriteString(conn, line+"\r\nX-Case: "+c.name+"\r\n"+rest); err != nil {
		t.Fatal(err)
	}
	method, _, _ := strings.Cut(line, " ")
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		return 0, false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Close
}

// bypassCounted wants in's rlproxy_bad_requests_total to be exactly want
// (reason → count), every other reason 0.
func bypassCounted(t *testing.T, in *rlproxytest.Instance, want map[string]int) {
	t.Helper()
	mf := in.Metrics(t)["rlproxy_bad_requests_total"]
	if mf == nil {
		t.Fatal("no rlproxy_bad_requests_total")
	}
	got := map[string]int{}
	for _, m := range mf.GetMetric() {
		if n := int(m.GetCounter().GetValue()); n > 0 {
			got[m.GetLabel()[0].GetValue()] = n
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: rlproxy_bad_requests_total %v, want %v", in.URL, got, want)
	}
}
