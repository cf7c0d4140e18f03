package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/config"
	"rlproxy/internal/h1"
	"rlproxy/internal/policy"
	"rlproxy/internal/store/memory"
	"rlproxy/internal/testutil/netutil"
)

// nativeProxy is a Server (memory store) served by a real h1.Server over
// loopback, its Fallback (the requests ServeH1 hands over) served by
// net/http with the same Server, and, beside it, the std path alone
// (net/http serving ServeHTTP) for comparison.
type nativeProxy struct {
	s         *Server
	addr, std string
	handed    *atomic.Int32 // connections ServeH1 handed to net/http
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int32
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

func newNativeProxy(t testing.TB, yaml string) *nativeProxy {
	t.Helper()
	cfg, err := config.ParseWith("native.yaml", []byte("listen: \"127.0.0.1:0\"\nadmin_listen: \"\"\n"+yaml), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ms := memory.New(memory.Options{MaxKeys: 1000, SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	l, err := policy.New(cfg, policy.Options{Store: ms})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	set := NewUpstreamSet(nil, log, nil)
	t.Cleanup(set.Close)
	rt, err := NewRuntimeOn(set, cfg, l, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	s := New(rt, nil, log)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	eng := &h1.Server{Handler: s, Fallback: h1.NewListener(ln.Addr()), ReadHeaderTimeout: 10 * time.Second}
	fallback := &http.Server{Handler: s}
	handed := new(atomic.Int32)
	go func() { _ = fallback.Serve(countingListener{eng.Fallback, handed}) }()
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); eng.ServeConn(c) }()
		}
	}()
	std := httptest.NewServer(s)
	t.Cleanup(func() {
		_ = ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = eng.Shutdown(ctx)
		_ = fallback.Shutdown(ctx)
		wg.Wait()
		std.Close()
	})
	return &nativeProxy{s: s, addr: ln.Addr().String(), std: std.Listener.Addr().String(), handed: handed}
}

// served checks that ServeH1 served every request itself: no connection
// was handed to net/http.
func (p *nativeProxy) served(t *testing.T) {
	t.Helper()
	if n := p.handed.Load(); n != 0 {
		t.Errorf("%d connections handed to net/http", n)
	}
}

// seenRequest is what the upstream received of one request.
type seenRequest struct {
	line   string // method, target, protocol
	host   string
	header http.Header
	body   string
	trail  http.Header
}

// recordingUpstream is a real net/http upstream that records what it
// receives and answers with answer.
type recordingUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

func newRecordingUpstream(t testing.TB, answer http.HandlerFunc) *recordingUpstream {
	u := &recordingUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, seenRequest{line: r.Method + " " + r.RequestURI + " " + r.Proto, host: r.Host,
			header: r.Header.Clone(), body: string(b), trail: r.Trailer.Clone()})
		u.mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *recordingUpstream) last(t *testing.T) seenRequest {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		t.Fatal("the upstream received nothing")
	}
	return u.seen[len(u.seen)-1]
}

// exchange sends raw on a new connection to addr and reads n final
// responses (interim ones skipped).
func exchange(t *testing.T, addr, raw string, n int) []*http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var out []*http.Response
	for range n {
		resp, err := http.ReadResponse(br, nil)
		for err == nil && resp.StatusCode < 200 { // a 100 Continue, a 103: interim
			resp, err = http.ReadResponse(br, nil)
		}
		if err != nil {
			t.Fatalf("response %d: %v", len(out)+1, err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("response %d body: %v", len(out)+1, err)
		}
		resp.Body = io.NopCloser(strings.NewReader(string(b)))
		out = append(out, resp)
	}
	return out
}

func bodyOf(r *http.Response) string {
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

const nativePolicy = `
store: { type: memory }
policies:
  two:
    algorithm: token_bucket
    rate: 1r/m
    burst: 2
    key: ip
routes:
  - { name: all, match: { path_prefix: / }, upstream: app, policies: [two] }
`

func hello13(w http.ResponseWriter, _ *http.Request) {
	w.Header()["Content-Type"] = []string{"text/plain"}
	_, _ = io.WriteString(w, "hello, world\n")
}

// TestNativeQuotaAndRefusal: two requests pass with their quota headers,
// the third is refused by the engine's path with 429 problem+json and a
// Retry-After of exactly 60 s (one token a minute), on one kept
// connection (pipelined), and the upstream sees the two only.
func TestNativeQuotaAndRefusal(t *testing.T) {
	up := newRecordingUpstream(t, hello13)
	p := newNativeProxy(t, fmt.Sprintf("upstreams: { app: { url: %q } }\n", up.URL)+nativePolicy)
	req := "GET /a?x=1 HTTP/1.1\r\nHost: api.test\r\nUser-Agent: t\r\n\r\n"
	rs := exchange(t, p.addr, req+req+req, 3)
	for i, want := range []string{`"two";r=1;t=60`, `"two";r=0;t=120`} {
		r := rs[i]
		if r.StatusCode != 200 || bodyOf(r) != "hello, world\n" {
			t.Fatalf("response %d: %d", i+1, r.StatusCode)
		}
		if got := r.Header.Get("RateLimit"); got != want {
			t.Errorf("response %d: RateLimit %q, want %q", i+1, got, want)
		}
		if got := r.Header.Get("RateLimit-Policy"); got != `"two";q=2;w=120` {
			t.Errorf("response %d: RateLimit-Policy %q", i+1, got)
		}
	}
	r := rs[2]
	if r.StatusCode != 429 || r.Header.Get("Retry-After") != "60" || r.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("third: %d, Retry-After %q, Content-Type %q", r.StatusCode, r.Header.Get("Retry-After"), r.Header.Get("Content-Type"))
	}
	if got := r.Header.Get("RateLimit"); got != `"two";r=0;t=120` {
		t.Errorf("429 RateLimit %q", got)
	}
	if b := bodyOf(r); !strings.Contains(b, `"status":429`) || !strings.Contains(b, `"retryAfter":60`) || !strings.Contains(b, `"instance":"/a"`) {
		t.Errorf("429 body %s", b)
	}
	up.mu.Lock()
	n := len(up.seen)
	up.mu.Unlock()
	if n != 2 {
		t.Errorf("the upstream received %d requests, want 2", n)
	}
	p.served(t)
}

// TestNativeDeadUpstream: an upstream that refuses connections is a 502
// problem, and the connection stays usable.
func TestNativeDeadUpstream(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	p := newNativeProxy(t, fmt.Sprintf("upstreams: { app: { url: \"http://%s\" } }\nroutes:\n  - { name: all, upstream: app }\n", dead))
	req := "GET /x HTTP/1.1\r\nHost: a.test\r\n\r\n"
	rs := exchange(t, p.addr, req+req, 2)
	for _, r := range rs {
		if r.StatusCode != 502 || !strings.Contains(bodyOf(r), "urn:rlproxy:problem:bad-gateway") {
			t.Fatalf("status %d", r.StatusCode)
		}
	}
	p.served(t)
}

// TestNativePost: a 1 KiB body with Content-Length and the same chunked
// (with a trailer) reach the upstream whole, on one connection.
func TestNativePost(t *testing.T) {
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
	p := newNativeProxy(t, fmt.Sprintf("upstreams: { app: { url: %q } }\nroutes:\n  - { name: all, upstream: app }\n", up.URL))
	body := strings.Repeat("0123456789abcdef", 64)
	cl := "POST /up HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1024\r\n\r\n" + body
	chunked := "POST /up HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n" +
		"200\r\n" + body[:512] + "\r\n200\r\n" + body[512:] + "\r\n0\r\nX-Sum: 7\r\n\r\n"
	rs := exchange(t, p.addr, cl, 1)
	if rs[0].StatusCode != 200 || up.last(t).body != body {
		t.Fatalf("content-length: %d, upstream got %d bytes", rs[0].StatusCode, len(up.last(t).body))
	}
	rs = exchange(t, p.addr, chunked, 1)
	got := up.last(t)
	if rs[0].StatusCode != 200 || got.body != body || got.trail.Get("X-Sum") != "7" {
		t.Fatalf("chunked: %d, upstream got %d bytes, trailer %v", rs[0].StatusCode, len(got.body), got.trail)
	}
	p.served(t)
}

// TestNativeUpstreamHeadLikeStd: what the upstream receives from the
// engine's path is what it receives from the std path for the same
// request (header fields by name and value, request line, Host), but
// the documented differences (docs/ENGINE.md).
func TestNativeUpstreamHeadLikeStd(t *testing.T) {
	up := newRecordingUpstream(t, hello13)
	p := newNativeProxy(t, fmt.Sprintf(`upstreams:
  app:
    url: %q
    request_headers: { set: { X-Env: prod }, remove: [X-Secret] }
real_ip: { trusted_proxies: [127.0.0.0/8] }
`, up.URL)+strings.Replace(nativePolicy, "burst: 2", "burst: 100", 1))
	raw := "GET /p/q?b=2&a=1 HTTP/1.1\r\nHost: api.test:8080\r\nuser-agent: t/1\r\nAccept: */*\r\n" +
		"X-Forwarded-For: 10.1.1.1\r\nX-Real-IP: 6.6.6.6\r\nForwarded: for=1.2.3.4\r\nX-Secret: s\r\n" +
		"Connection: keep-alive, X-Hop\r\nX-Hop: h\r\nX-Request-Id: abc-1\r\nCookie: a=1\r\nCookie: b=2\r\n\r\n"
	post := "POST /up HTTP/1.1\r\nHost: api.test\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n" +
		"Expect: 100-continue\r\nX-Real-Ip: 1.1.1.1\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
	for _, raw := range []string{raw, post} {
		exchange(t, p.addr, raw, 1)
		p.served(t)
		native := up.last(t)
		exchange(t, p.std, raw, 1)
		std := up.last(t)
		if native.line != std.line || native.host != std.host || native.body != std.body {
			t.Errorf("request line %q Host %q body %q; std %q %q %q", native.line, native.host, native.body, std.line, std.host, std.body)
		}
		if fmt.Sprint(native.header) != fmt.Sprint(std.header) {
			t.Errorf("upstream header\nengine: %v\nstd:    %v", native.header, std.header)
		}
	}
	seen := up.seen[0]
	if got := seen.header.Get("X-Forwarded-For"); got != "10.1.1.1, 127.0.0.1" {
		t.Errorf("X-Forwarded-For %q", got)
	}
}

// TestNativeHandsOver: a request the engine's path does not serve (an
// Upgrade) goes to net/http with its connection, before anything is
// decided: it is charged once (RateLimit's remaining 1 of 2), and
// answered with Connection: close there (the std path closes after an
// Upgrade it did not switch); the next request, on a new connection, is
// the engine's.
func TestNativeHandsOver(t *testing.T) {
	up := newRecordingUpstream(t, hello13)
	p := newNativeProxy(t, fmt.Sprintf("upstreams: { app: { url: %q } }\n", up.URL)+nativePolicy)
	rs := exchange(t, p.addr, "GET /ws HTTP/1.1\r\nHost: a.test\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n", 1)
	if rs[0].StatusCode != 200 || rs[0].Header.Get("RateLimit") != `"two";r=1;t=60` || !rs[0].Close {
		t.Fatalf("first: %d, RateLimit %q, close %v", rs[0].StatusCode, rs[0].Header.Get("RateLimit"), rs[0].Close)
	}
	rs = exchange(t, p.addr, "GET /b HTTP/1.1\r\nHost: a.test\r\n\r\n", 1)
	if rs[0].StatusCode != 200 || rs[0].Header.Get("RateLimit") != `"two";r=0;t=120` {
		t.Fatalf("second: %d, RateLimit %q", rs[0].StatusCode, rs[0].Header.Get("RateLimit"))
	}
	if n := p.handed.Load(); n != 1 {
		t.Fatalf("%d connections handed over, want 1", n)
	}
}

// TestNativeKeepAliveAndPipelining: five requests pipelined on one
// client connection are answered in order over one kept upstream
// connection.
func TestNativeKeepAliveAndPipelining(t *testing.T) {
	var conns atomic.Int32
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.URL.Path) })
	up.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	p := newNativeProxy(t, fmt.Sprintf("upstreams: { app: { url: %q } }\nroutes:\n  - { name: all, upstream: app }\n", up.URL))
	var raw strings.Builder
	for i := range 5 {
		fmt.Fprintf(&raw, "GET /r%d HTTP/1.1\r\nHost: a.test\r\n\r\n", i)
	}
	rs := exchange(t, p.addr, raw.String(), 5)
	for i, r := range rs {
		if b := bodyOf(r); r.StatusCode != 200 || b != fmt.Sprintf("/r%d", i) {
			t.Fatalf("response %d: %d %q", i, r.StatusCode, b)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d upstream connections, want 1", n)
	}
	p.served(t)
}

// TestNativeOwnAnswers: no route is a 404, a declared body over
// max_body_size a 413 before anything is read or charged (the connection
// closes), an upstream silent past response_header_timeout a 504.
func TestNativeOwnAnswers(t *testing.T) {
	release := make(chan struct{})
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
	})
	defer close(release)
	p := newNativeProxy(t, fmt.Sprintf(`upstreams: { app: { url: %q, response_header_timeout: 200ms } }
routes:
  - { name: api, match: { path_prefix: /api/ }, upstream: app, max_body_size: 10 }
  - { name: slow, match: { path_prefix: /slow }, upstream: app }
`, up.URL))
	r := exchange(t, p.addr, "GET /other HTTP/1.1\r\nHost: a.test\r\n\r\n", 1)[0]
	if r.StatusCode != 404 || !strings.Contains(bodyOf(r), "urn:rlproxy:problem:no-route") {
		t.Fatalf("no route: %d", r.StatusCode)
	}
	r = exchange(t, p.addr, "POST /api/x HTTP/1.1\r\nHost: a.test\r\nContent-Length: 11\r\n\r\n", 1)[0]
	if r.StatusCode != 413 || !r.Close {
		t.Fatalf("too large: %d, close %v", r.StatusCode, r.Close)
	}
	r = exchange(t, p.addr, "GET /slow HTTP/1.1\r\nHost: a.test\r\n\r\n", 1)[0]
	if r.StatusCode != 504 || !strings.Contains(bodyOf(r), "urn:rlproxy:problem:gateway-timeout") {
		t.Fatalf("slow: %d", r.StatusCode)
	}
	p.served(t)
}

// TestNativeEventStream: each event of a text/event-stream response
// reaches the client as the upstream flushes it, before the stream ends.
func TestNativeEventStream(t *testing.T) {
	next := make(chan struct{})
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 2 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			<-next
		}
	})
	p := newNativeProxy(t, fmt.Sprintf("upstreams: { app: { url: %q } }\nroutes:\n  - { name: all, upstream: app }\n", up.URL))
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	_, _ = io.WriteString(c, "GET /events HTTP/1.1\r\nHost: a.test\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: %d\n", i) {
			t.Fatalf("event %d: %q %v", i, line, err)
		}
		next <- struct{}{}
	}
	p.served(t)
}

// TestNativeBadRequests: a request reqview refuses (a path above the
// root, a repeated Authorization) is a 400 problem from the engine's
// path, and the connection closes after it.
func TestNativeBadRequests(t *testing.T) {
	up := newRecordingUpstream(t, hello13)
	p := newNativeProxy(t, fmt.Sprintf("upstreams: { app: { url: %q } }\nroutes:\n  - { name: all, upstream: app }\n", up.URL))
	for _, raw := range []string{
		"GET /a/../../etc HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"GET /a HTTP/1.1\r\nHost: a.test\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\n\r\n",
	} {
		r := exchange(t, p.addr, raw+"GET /next HTTP/1.1\r\nHost: a.test\r\n\r\n", 1)[0]
		if r.StatusCode != 400 || !r.Close {
			t.Errorf("%q: %d, close %v", raw, r.StatusCode, r.Close)
		}
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.seen) != 0 {
		t.Errorf("the upstream received %d requests", len(up.seen))
	}
	p.served(t)
}

// TestNativeEventStreamClientLeaves: a client that closes a silent event
// stream ends the upstream exchange (its connection is closed, so the
// upstream's request context ends), and the record says 200 with the
// bytes sent.
func TestNativeEventStreamClientLeaves(t *testing.T) {
	ended := make(chan struct{})
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(ended)
	})
	p := newNativeProxy(t, fmt.Sprintf("upstreams: { app: { url: %q } }\nroutes:\n  - { name: all, upstream: app }\n", up.URL))
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	_, _ = io.WriteString(c, "GET /events HTTP/1.1\r\nHost: a.test\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "data: one\n" {
		t.Fatalf("first event %q (%v)", line, err)
	}
	c.Close()
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream exchange did not end after the client left")
	}
	p.served(t)
}

// TestNativeRetriesNextServer: with one server refusing connections,
// every GET is answered by the other (retried there, as on std), and
// max_fails 1 takes the dead one out of rotation after its first failure.
func TestNativeRetriesNextServer(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	up := newRecordingUpstream(t, hello13)
	p := newNativeProxy(t, fmt.Sprintf(`upstreams: { app: { urls: ["http://%s", %q], max_fails: 1, fail_timeout: 30s } }
routes:
  - { name: all, upstream: app }
`, dead, up.URL))
	req := "GET /x HTTP/1.1\r\nHost: a.test\r\n\r\n"
	for i, r := range exchange(t, p.addr, req+req+req+req, 4) {
		if r.StatusCode != 200 {
			t.Fatalf("request %d: %d", i+1, r.StatusCode)
		}
	}
	up.mu.Lock()
	n := len(up.seen)
	up.mu.Unlock()
	if n != 4 {
		t.Errorf("the live server received %d requests, want 4", n)
	}
	p.served(t)
}

// TestNativeNoReplayAfterSend: on a reused upstream connection that the
// upstream closes after reading a request head (without answering), a
// body-less GET goes again on a new connection (200) but a body-less POST
// is not sent twice (502): the upstream may have acted on it.
func TestNativeNoReplayAfterSend(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	addr := netutil.ServeConns(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for n := 0; ; n++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			mu.Lock()
			seen[req.Method+" "+req.URL.Path]++
			mu.Unlock()
			if n > 0 && strings.HasPrefix(req.URL.Path, "/drop") {
				return // on a reused connection: read it, answer nothing
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	p := newNativeProxy(t, fmt.Sprintf("upstreams: { app: { url: \"http://%s\", retries: 0 } }\nroutes:\n  - { name: all, upstream: app }\n", addr))
	for _, tc := range []struct {
		method string
		status int
		sent   int
	}{{"GET", 200, 2}, {"POST", 502, 1}} {
		path := "/drop-" + strings.ToLower(tc.method)
		rs := exchange(t, p.addr, "GET /warm HTTP/1.1\r\nHost: a.test\r\n\r\n"+
			tc.method+" "+path+" HTTP/1.1\r\nHost: a.test\r\n\r\n", 2)
		mu.Lock()
		got := seen[tc.method+" "+path]
		mu.Unlock()
		if rs[0].StatusCode != 200 || rs[1].StatusCode != tc.status || got != tc.sent {
			t.Errorf("%s on a connection closed under it: %d then %d, the upstream got it %d times; want 200, %d, %d",
				tc.method, rs[0].StatusCode, rs[1].StatusCode, got, tc.status, tc.sent)
		}
	}
	p.served(t)
}

// TestNativeClientGoneWhileAwaited: a client that half-closes its
// connection after its request, while the upstream has not answered, is
// seen gone (about a second): it gets no answer at all (as nginx closes
// without one, 499), not a 500, and the upstream connection is closed.
func TestNativeClientGoneWhileAwaited(t *testing.T) {
	upClosed := make(chan struct{})
	addr := netutil.ServeConns(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, c) // never answers; returns when the proxy closes
		close(upClosed)
	})
	p := newNativeProxy(t, fmt.Sprintf("upstreams: { app: { url: \"http://%s\", response_header_timeout: 60s } }\nroutes:\n  - { name: all, upstream: app }\n", addr))
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /hang HTTP/1.1\r\nHost: a.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || len(got) != 0 {
		t.Fatalf("the gone client got %q, %v; want the connection closed without an answer", got, err)
	}
	select {
	case <-upClosed:
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream connection was not closed")
	}
	p.served(t)
}
