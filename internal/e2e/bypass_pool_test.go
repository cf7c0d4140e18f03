package e2e

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/nginxtest"
	"rlproxy/internal/testutil/rlproxytest"
)

// bpUpstream is a raw HTTP/1.1 upstream that records every request it
// reads (path and the Upgrade and HTTP2-Settings fields it got) and
// answers 200 "ok" after reading the body — or, to a request that asks for
// an upgrade, 101 to that protocol and then echoes the tunnel's bytes: an
// upstream that switches whenever it is asked (h2c included), except for
// the path /first, where it declines (200).
type bpUpstream struct {
	addr string
	mu   sync.Mutex
	seen []bpSeen
}

// bpSeen is one request an upstream read.
type bpSeen struct {
	path, upgrade string
	settings      bool // an HTTP2-Settings field
}

func newBPUpstream(t *testing.T) *bpUpstream {
	t.Helper()
	u := &bpUpstream{}
	u.addr = netutil.ServeConns(t, u.serve)
	return u
}

func (u *bpUpstream) url() string { return "http://" + u.addr }

func (u *bpUpstream) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		up := req.Header.Get("Upgrade")
		u.mu.Lock()
		u.seen = append(u.seen, bpSeen{path: req.URL.Path, upgrade: up, settings: req.Header["Http2-Settings"] != nil})
		u.mu.Unlock()
		if up != "" && httpguts.HeaderValuesContainsToken(req.Header["Connection"], "upgrade") && req.URL.Path != "/first" {
			fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", up)
			_, _ = io.Copy(c, br)
			return
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"); err != nil {
			return
		}
	}
}

// requests returns what the upstream has read so far.
func (u *bpUpstream) requests() []bpSeen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.seen)
}

// count returns how many requests for path the upstream read.
func (u *bpUpstream) count(path string) int {
	n := 0
	for _, s := range u.requests() {
		if s.path == path {
			n++
		}
	}
	return n
}

// bpProxy is one proxy under test: nginx (TLS with HTTP/2, the
// reference) or rlproxy on one of its listeners — plain HTTP/1.1, plain
// with h2c (prior-knowledge HTTP/2 next to HTTP/1.1), or TLS (HTTP/2 by
// ALPN).
type bpProxy struct {
	name string
	addr string
	tls  bool
	h2   bool                  // speaks HTTP/2
	in   *rlproxytest.Instance // rlproxy's; nil for nginx
}

// bpListeners are rlproxy's listeners every rule must hold on.
var bpListeners = []string{"plain", "h2c", "tls"}

// bpCert writes a self-signed certificate for 127.0.0.1 and returns its
// files.
func bpCert(t *testing.T) (certFile, keyFile string) {
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	opsCert(t, certFile, keyFile, 1)
	return certFile, keyFile
}

// bpRlproxy starts rlproxy on listener with the config body (upstreams,
// policies, routes).
func bpRlproxy(t *testing.T, listener, body string) bpProxy {
	t.Helper()
	front := ""
	switch listener {
	case "h2c":
		front = "server: { h2c: true }\n"
	case "tls":
		cert, key := bpCert(t)
		front = fmt.Sprintf("tls: { cert_file: %q, key_file: %q }\n", cert, key)
	}
	in := rlproxytest.Start(t, front+body)
	return bpProxy{name: "rlproxy-" + listener, addr: strings.TrimPrefix(in.URL, "http://"), tls: listener == "tls", h2: listener != "plain", in: in}
}

// bpNginx starts nginx over TLS with HTTP/2, proxying to the servers (the
// transparent configuration of TestNginxTransparency: HTTP/1.1 upstream
// keep-alive, the client's Host, streamed request bodies).
func bpNginx(t *testing.T, servers ...string) bpProxy {
	t.Helper()
	cert, key := bpCert(t)
	pool := ""
	for _, s := range servers {
		pool += "server " + strings.TrimPrefix(s, "http://") + ";\n"
	}
	ng := nginxtest.Start(t, fmt.Sprintf(`
    upstream pool { %s }
    server {
        listen {{listen}} ssl http2;
        ssl_certificate %s;
        ssl_certificate_key %s;
        client_max_body_size 0;
        location / {
            proxy_pass http://pool;
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header Connection "";
            proxy_request_buffering off;
        }
    }`, pool, cert, key))
	return bpProxy{name: "nginx", addr: ng.Addr, tls: true, h2: true}
}

// dial opens a connection to p speaking HTTP/2 when h2 is set, else
// HTTP/1.1.
func (p bpProxy) dial(t *testing.T, h2 bool) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	if !p.tls {
		return c
	}
	proto := "http/1.1"
	if h2 {
		proto = "h2"
	}
	tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{proto}})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("%s: TLS handshake: %v", p.name, err)
	}
	if got := tc.ConnectionState().NegotiatedProtocol; got != proto {
		t.Fatalf("%s: ALPN %q, want %q", p.name, got, proto)
	}
	return tc
}

// bpAnswer is what a proxy answered to raw HTTP/1.1 bytes on one
// connection: each response's status, header, body and whether it said
// Connection: close (http.ReadResponse takes that field out of the
// header), and whether the proxy closed the connection after them.
type bpAnswer struct {
	statuses []int
	headers  []http.Header
	bodies   []string
	closes   []bool
	closed   bool
}

// exchange writes raw on a new HTTP/1.1 connection to p and reads
// responses until p closes the connection (or its deadline passes: then
// closed is false). A 101 ends the reading: the connection is a tunnel.
func (p bpProxy) exchange(t *testing.T, raw string) (bpAnswer, net.Conn, *bufio.Reader) {
	t.Helper()
	c := p.dial(t, false)
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	var a bpAnswer
	br := bufio.NewReader(c)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			a.closed = err == io.EOF || err == io.ErrUnexpectedEOF
			return a, c, br
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		a.statuses, a.headers, a.bodies = append(a.statuses, resp.StatusCode), append(a.headers, resp.Header), append(a.bodies, string(b))
		a.closes = append(a.closes, resp.Close)
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return a, c, br
		}
	}
}

// h2Status sends one HTTP/2 request (no body) with the given :method and
// :path to p on a new connection and returns the response's :status, 0
// when the stream or connection was reset instead.
func (p bpProxy) h2Status(t *testing.T, method, path string) int {
	t.Helper()
	c := p.dial(t, true)
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	scheme := "http"
	if p.tls {
		scheme = "https"
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", method}, {":scheme", scheme}, {":authority", "h"}, {":path", path}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	dec := hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return 0
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			fields, err := dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				t.Fatalf("%s: response header: %v", p.name, err)
			}
			for _, hf := range fields {
				if hf.Name == ":status" {
					n, _ := strconv.Atoi(hf.Value)
					return n
				}
			}
		case *http2.RSTStreamFrame, *http2.GoAwayFrame:
			return 0
		}
	}
}

// bpTarget starts the proxy named target ("nginx" or one of bpListeners)
// in front of servers; rlproxy gets yaml (with the servers' URLs in it).
func bpTarget(t *testing.T, target, yaml string, servers ...string) bpProxy {
	t.Helper()
	if target == "nginx" {
		return bpNginx(t, servers...)
	}
	return bpRlproxy(t, target, yaml)
}

// bpTargets is nginx, then rlproxy on each listener.
var bpTargets = append([]string{"nginx"}, bpListeners...)

// bpBig is a policy no test request reaches: the routes are limited, as
// operators write them, without refusing anything.
const bpBig = "policies: { big: { algorithm: token_bucket, rate: 1000r/s, burst: 1000, key: ip } }\n"

// TestBypassPoolClientFaults: two requests that fail by the client's own
// fault — a malformed chunked body, a malformed trailer line, an HTTP/2
// :method that is not a token (Go's transport refuses to send it) — get
// 400 each, and leave both servers of a two-server pool (default
// max_fails 1) in rotation: four innocent requests after them are 200
// and go two to each server, on nginx and on every rlproxy listener.
func TestBypassPoolClientFaults(t *testing.T) {
	cases := []struct {
		name     string
		raw      string // HTTP/1.1 bytes
		h2Method string // else an HTTP/2 request with this :method
		// nginx, when not 400: it skips a chunked body's trailer lines
		// unparsed, so a malformed one is no error there.
		nginx int
	}{
		{name: "malformed-chunk", raw: "POST /attack HTTP/1.1\r\nHost: h\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n"},
		{name: "malformed-trailer", raw: "POST /attack HTTP/1.1\r\nHost: h\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nbad trailer\r\n\r\n", nginx: 200},
		{name: "h2-method-not-token", h2Method: "G(T"},
	}
	const innocent = "GET /innocent HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
	for _, c := range cases {
		for _, target := range bpTargets {
			t.Run(c.name+"/"+target, func(t *testing.T) {
				if c.raw == "" && target == "plain" {
					t.Skip("no HTTP/2 on a plain listener without h2c")
				}
				a, b := newBPUpstream(t), newBPUpstream(t)
				p := bpTarget(t, target, fmt.Sprintf("upstreams: { app: { urls: [%q, %q] } }\n%sroutes: [ { name: all, upstream: app, policies: [big] } ]\n",
					a.url(), b.url(), bpBig), a.url(), b.url())
				for i := range 2 {
					var statuses []int
					if c.raw != "" {
						ans, _, _ := p.exchange(t, c.raw)
						statuses = ans.statuses
					} else {
						statuses = []int{p.h2Status(t, c.h2Method, "/attack")}
					}
					want := 400
					if target == "nginx" && c.nginx != 0 {
						want = c.nginx
					}
					if !slices.Equal(statuses, []int{want}) {
						t.Errorf("%s: attack %d answered %v, want [%d]", p.name, i, statuses, want)
					}
				}
				for i := range 4 {
					if ans, _, _ := p.exchange(t, innocent); !slices.Equal(ans.statuses, []int{200}) {
						t.Errorf("%s: innocent request %d answered %v %q, want [200]", p.name, i, ans.statuses, ans.bodies)
					}
				}
				if na, nb := a.count("/innocent"), b.count("/innocent"); na != 2 || nb != 2 {
					t.Errorf("%s: innocent requests per server %d and %d, want 2 and 2 (both servers in rotation)", p.name, na, nb)
				}
				if p.in != nil {
					bpClientFaultMetrics(t, p, c.raw != "")
				}
			})
		}
	}
}

// bpClientFaultMetrics checks rlproxy's metrics after two client faults:
// both servers up (rlproxy_upstream_server_up), no upstream error counted,
// and for a bad body both counted as client_body. (The HTTP/2 case may be
// refused before the pool, by a check of methods at the front, so its
// reason is not pinned here.)
func bpClientFaultMetrics(t *testing.T, p bpProxy, body bool) {
	t.Helper()
	_, samples := opsScrape(t, p.in)
	up := 0
	for _, s := range samples {
		if s.name == "rlproxy_upstream_server_up" && s.labels["upstream"] == "app" && s.value == 1 {
			up++
		}
	}
	if up != 2 {
		t.Errorf("%s: rlproxy_upstream_server_up: %d servers at 1, want 2", p.name, up)
	}
	if n := opsValue(t, samples, "rlproxy_upstream_errors_total", "route", "all"); n != 0 {
		t.Errorf("%s: rlproxy_upstream_errors_total %v, want 0", p.name, n)
	}
	if n := opsValue(t, samples, "rlproxy_proxy_errors_total", "route", "all", "reason", "client_body"); body && n != 2 {
		t.Errorf("%s: rlproxy_proxy_errors_total{reason=client_body} %v, want 2", p.name, n)
	}
}

// last returns the last request u read for path.
func (u *bpUpstream) last(t *testing.T, path string) bpSeen {
	t.Helper()
	seen := u.requests()
	for i := len(seen) - 1; i >= 0; i-- {
		if seen[i].path == path {
			return seen[i]
		}
	}
	t.Fatalf("the upstream never got %s", path)
	return bpSeen{}
}

// TestBypassUpgrades: `Upgrade: h2c` with HTTP2-Settings never reaches an
// upstream that would switch (nginx and every rlproxy listener answer
// 200 from an ordinary request); on rlproxy a route's upgrades list
// decides: `Upgrade: tcp` on a route listing tcp is a working tunnel, tcp
// on a route without it and an unlisted protocol are dropped (200, the
// connection closed after), websocket (the default list) switches.
func TestBypassUpgrades(t *testing.T) {
	const h2c = "GET /h2c HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"
	for _, target := range bpTargets {
		t.Run(target, func(t *testing.T) {
			up := newBPUpstream(t)
			p := bpTarget(t, target, fmt.Sprintf(`upstreams: { app: { url: %q } }
%sroutes:
  - { name: attach, match: { path_prefix: /tcp/ }, upstream: app, policies: [big], upgrades: [websocket, tcp] }
  - { name: all, upstream: app, policies: [big] }
`, up.url(), bpBig), up.url())
			raw := h2c
			if target == "nginx" { // nginx keeps the connection: let it close
				raw = strings.Replace(h2c, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1)
			}
			ans, _, _ := p.exchange(t, raw)
			// nginx forwards HTTP2-Settings (harmless without the
			// Upgrade); rlproxy drops it, as the Connection field names it.
			if seen := up.last(t, "/h2c"); !slices.Equal(ans.statuses, []int{200}) || seen.upgrade != "" || seen.settings && target != "nginx" {
				t.Errorf("%s: h2c answered %v; upstream got Upgrade %q, HTTP2-Settings %v; want 200 and neither", p.name, ans.statuses, seen.upgrade, seen.settings)
			}
			if target == "nginx" {
				return // the allowlist is rlproxy's own
			}
			if !ans.closed || !ans.closes[0] {
				t.Errorf("%s: h2c: connection closed %v (Connection: close %v), want closed after an upgrade not switched", p.name, ans.closed, ans.closes[0])
			}
			ans, c, br := p.exchange(t, "POST /tcp/attach HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n")
			if !slices.Equal(ans.statuses, []int{101}) || ans.headers[0].Get("Upgrade") != "tcp" {
				t.Fatalf("%s: Upgrade: tcp on a route listing it answered %v, want 101 tcp", p.name, ans.statuses)
			}
			_, _ = io.WriteString(c, "ping\n")
			if line, err := br.ReadString('\n'); line != "ping\n" {
				t.Errorf("%s: through the tcp tunnel: %q (%v), want the echo", p.name, line, err)
			}
			for _, d := range []struct{ path, raw string }{
				{"/plain", "POST /plain HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n"},
				{"/tcp/foo", "GET /tcp/foo HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: foo/1\r\n\r\n"},
			} {
				ans, _, _ := p.exchange(t, d.raw)
				if seen := up.last(t, d.path); !slices.Equal(ans.statuses, []int{200}) || !ans.closed || seen.upgrade != "" {
					t.Errorf("%s: %s answered %v closed %v, upstream got Upgrade %q; want 200, closed, none", p.name, d.path, ans.statuses, ans.closed, seen.upgrade)
				}
			}
			ans, _, _ = p.exchange(t, "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
			if !slices.Equal(ans.statuses, []int{101}) {
				t.Errorf("%s: websocket answered %v, want 101 (the default list)", p.name, ans.statuses)
			}
		})
	}
}

// TestBypassGuardAfterUnswitched: after an upgrade request answered
// without a switch (the upstream declined a websocket upgrade, or the
// route's list dropped the protocol), and after an HTTP/1.2 request line, an obs-fold or a
// Content-Length + Transfer-Encoding request pipelined behind it never
// reaches the upstream as a second request: rlproxy closes the connection
// after the first answer (Connection: close) on every listener; nginx
// answers the second with 400 and closes. On server.engine auto the
// HTTP/1.2 request itself is refused (400), so none reaches the upstream.
func TestBypassGuardAfterUnswitched(t *testing.T) {
	firsts := []struct{ name, raw string }{
		{"upgrade-declined", "GET /first HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"},
		{"upgrade-dropped", "GET /first HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: foo\r\n\r\n"},
		{"http-1.2", "GET /first HTTP/1.2\r\nHost: h\r\n\r\n"},
	}
	seconds := []struct{ name, raw string }{
		{"obs-fold", "GET /smuggled HTTP/1.1\r\nHost: h\r\nX-Folded: a\r\n b\r\n\r\n"},
		{"cl-te", "POST /smuggled HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nX"},
	}
	const third = "GET /third HTTP/1.1\r\nHost: h\r\n\r\n"
	for _, target := range bpTargets {
		t.Run(target, func(t *testing.T) {
			up := newBPUpstream(t)
			p := bpTarget(t, target, fmt.Sprintf("upstreams: { app: { url: %q } }\n%sroutes: [ { name: all, upstream: app, policies: [big] } ]\n",
				up.url(), bpBig), up.url())
			for _, f := range firsts {
				for _, s := range seconds {
					before := len(up.requests())
					ans, _, _ := p.exchange(t, f.raw+s.raw+third)
					var paths []string
					for _, r := range up.requests()[before:] {
						paths = append(paths, r.path)
					}
					want, status := []string{"/first"}, 200
					if f.name == "http-1.2" && target != "nginx" && rlproxytest.Engine() == "auto" {
						// The engine refuses HTTP/1.2 (its version rule, docs/ENGINE.md).
						want, status = nil, 400
					}
					if !slices.Equal(paths, want) || len(ans.statuses) == 0 || ans.statuses[0] != status || !ans.closed {
						t.Errorf("%s: %s + %s: upstream got %v, client %v closed %v; want %v alone, %d first, closed",
							p.name, f.name, s.name, paths, ans.statuses, ans.closed, want, status)
					}
					if target != "nginx" && (len(ans.statuses) != 1 || !ans.closes[0]) {
						t.Errorf("%s: %s + %s: answers %v, want one, with Connection: close", p.name, f.name, s.name, ans.statuses)
					}
				}
			}
		})
	}
}

// TestBypassGuardAfterConnect: a CONNECT is never forwarded (rlproxy 405,
// nginx 400), and the listener's guard stops checking after one, so an
// obs-fold or a Content-Length + Transfer-Encoding request pipelined behind
// it never reaches the upstream: both close the connection after the
// CONNECT's answer, on every listener.
func TestBypassGuardAfterConnect(t *testing.T) {
	const connect = "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n"
	seconds := []struct{ name, raw string }{
		{"obs-fold", "GET /smuggled HTTP/1.1\r\nHost: h\r\nX-Folded: a\r\n b\r\n\r\n"},
		{"cl-te", "POST /smuggled HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nX"},
		{"plain", "GET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n"},
	}
	for _, target := range bpTargets {
		t.Run(target, func(t *testing.T) {
			up := newBPUpstream(t)
			p := bpTarget(t, target, fmt.Sprintf("upstreams: { app: { url: %q } }\n%sroutes: [ { name: all, upstream: app, policies: [big] } ]\n",
				up.url(), bpBig), up.url())
			want := http.StatusMethodNotAllowed
			if target == "nginx" {
				want = http.StatusBadRequest
			}
			for _, s := range seconds {
				before := len(up.requests())
				ans, _, _ := p.exchange(t, connect+s.raw)
				if got := up.requests()[before:]; len(got) != 0 || !slices.Equal(ans.statuses, []int{want}) || !ans.closed {
					t.Errorf("%s: CONNECT + %s: upstream got %d requests, client %v closed %v; want none, [%d], closed",
						p.name, s.name, len(got), ans.statuses, ans.closed, want)
				}
			}
		})
	}
}
