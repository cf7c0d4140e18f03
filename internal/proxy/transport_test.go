package proxy_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The upstream transport (transport.go) on real loopback connections: an
// upstream server that counts the connections it accepts and the requests
// it serves, behind the whole request path (server.App's handler).

// countedUpstream is an upstream that counts accepted connections.
type countedUpstream struct {
	*httptest.Server
	conns    atomic.Int64
	requests atomic.Int64
	mu       sync.Mutex
	open     map[net.Conn]struct{} // the server's ends, until closed
}

func newCountedUpstream(t *testing.T, h http.HandlerFunc) *countedUpstream {
	t.Helper()
	u := &countedUpstream{open: map[net.Conn]struct{}{}}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.requests.Add(1)
		h(w, r)
	}))
	u.Config.ConnState = func(c net.Conn, s http.ConnState) {
		u.mu.Lock()
		defer u.mu.Unlock()
		switch s {
		case http.StateNew:
			u.conns.Add(1)
			u.open[c] = struct{}{}
		case http.StateClosed, http.StateHijacked:
			delete(u.open, c)
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// closeConns closes the server's end of every open connection, each once
// the peer acknowledged its FIN (waitAcked): the proxy's idle connections
// then hold the FIN, as an upstream's idle timeout leaves them.
func (u *countedUpstream) closeConns(t *testing.T) {
	t.Helper()
	u.mu.Lock()
	conns := slices.Collect(maps.Keys(u.open))
	u.mu.Unlock()
	for _, c := range conns {
		_ = c.(*net.TCPConn).CloseWrite()
		waitAcked(t, c)
		_ = c.Close()
	}
}

// proxyTo serves rlproxy's handler (no policy, one route to upstream)
// on a loopback server; extra is YAML added to the upstream's entry.
func proxyTo(t *testing.T, upstream, extra string) *httptest.Server {
	t.Helper()
	cfg := fmt.Sprintf("listen: \"127.0.0.1:0\"\nadmin_listen: \"\"\nupstreams:\n  app: { url: %q%s }\n"+
		"routes:\n  - { name: all, match: { path_prefix: / }, upstream: app }\n", upstream, extra)
	px := httptest.NewServer(benchAppT(t, cfg).Handler())
	t.Cleanup(px.Close)
	return px
}

// get does method on url and returns status and body.
func get(t *testing.T, c *http.Client, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return resp.StatusCode, string(b)
}

func hello(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") }

// Sequential requests share one upstream connection.
func TestTransportKeepAlive(t *testing.T) {
	up := newCountedUpstream(t, hello)
	getSequential(t, up, 50, "hello", 1)
}

// getSequential sends n GETs one after the other through a proxy to up,
// each of which must answer 200 with body, and then checks that up saw
// conns connections.
func getSequential(t *testing.T, up *countedUpstream, n int, body string, conns int64) {
	t.Helper()
	px := proxyTo(t, up.URL, "")
	for i := range n {
		if code, got := get(t, px.Client(), http.MethodGet, px.URL+"/x"); code != 200 || got != body {
			t.Fatalf("request %d: %d %q, want 200 %q", i, code, got, body)
		}
	}
	if got := up.conns.Load(); got != conns {
		t.Errorf("upstream connections: %d, want %d", got, conns)
	}
}

// An idle connection the upstream closed is noticed before any response
// byte and the request goes again on a new connection: the client sees
// no error, and the upstream handler ran once per request.
func TestTransportStaleIdleConnection(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			up := newCountedUpstream(t, hello)
			px := proxyTo(t, up.URL, "")
			for i := range 3 {
				code, _ := get(t, px.Client(), method, px.URL+"/x")
				if code != 200 {
					t.Fatalf("request %d: status %d", i, code)
				}
				up.closeConns(t) // the FIN is at the idle connection
			}
			if n := up.requests.Load(); n != 3 {
				t.Errorf("upstream served %d requests, want 3", n)
			}
			if n := up.conns.Load(); n != 3 {
				t.Errorf("upstream connections: %d, want 3", n)
			}
		})
	}
}

// Connection: close from the upstream is honoured: no reuse.
func TestTransportConnectionClose(t *testing.T) {
	up := newCountedUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "bye")
	})
	getSequential(t, up, 4, "bye", 4)
}

// response_header_timeout bounds the wait for the upstream's header (504,
// as nginx answers a proxy_read_timeout),
// and the connection it gave up on is not reused.
func TestTransportResponseHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	up := newCountedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-release:
			case <-r.Context().Done():
			case <-time.After(3 * time.Second): // a transport without the bound fails, not hangs
			}
		}
		io.WriteString(w, "hello")
	})
	defer close(release)
	px := proxyTo(t, up.URL, ", response_header_timeout: 300ms")
	if code, _ := get(t, px.Client(), http.MethodGet, px.URL+"/fast"); code != 200 {
		t.Fatalf("fast: %d", code)
	}
	t0 := time.Now()
	code, body := get(t, px.Client(), http.MethodGet, px.URL+"/slow")
	took := time.Since(t0)
	if code != http.StatusGatewayTimeout || !strings.Contains(body, "gateway-timeout") {
		t.Errorf("slow: %d %q, want 504 problem", code, body)
	}
	if took < 300*time.Millisecond || took > 2*time.Second {
		t.Errorf("slow answered after %v, want 300ms..2s", took)
	}
	if code, body := get(t, px.Client(), http.MethodGet, px.URL+"/fast"); code != 200 || body != "hello" {
		t.Fatalf("fast after timeout: %d %q", code, body)
	}
	if n := up.conns.Load(); n != 2 {
		t.Errorf("upstream connections: %d, want 2 (the timed-out one closed)", n)
	}
}

// A client that leaves while the upstream works cancels the upstream
// request: the upstream sees its connection go.
func TestTransportClientGone(t *testing.T) {
	gone := make(chan struct{})
	started := make(chan struct{})
	up := newCountedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-r.Context().Done():
			close(gone)
		case <-time.After(5 * time.Second):
		}
	})
	px := proxyTo(t, up.URL, "")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, px.URL+"/x", nil)
	errc := make(chan error, 1)
	go func() {
		resp, err := px.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; err == nil {
		t.Error("cancelled request succeeded")
	}
	select {
	case <-gone:
	case <-time.After(3 * time.Second):
		t.Fatal("upstream request not cancelled within 3s of the client leaving")
	}
}

// 1xx informational responses reach the client (ReverseProxy forwards
// what the transport reports through httptrace).
func TestTransportEarlyHints(t *testing.T) {
	up := newCountedUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		io.WriteString(w, "page")
	})
	px := proxyTo(t, up.URL, "")
	var got []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		got = append(got, fmt.Sprintf("%d %s", code, h.Get("Link")))
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, px.URL+"/", nil)
	resp, err := px.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "103 </style.css>; rel=preload"; len(got) != 1 || got[0] != want {
		t.Errorf("1xx seen: %q, want [%q]", got, want)
	}
	if resp.StatusCode != 200 || string(b) != "page" {
		t.Errorf("final: %d %q", resp.StatusCode, b)
	}
}

// Responses without a body (HEAD, 204, 304) leave the connection ready for
// the next request; a chunked body's trailers reach the client.
func TestTransportBodylessAndTrailers(t *testing.T) {
	up := newCountedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.WriteHeader(http.StatusNotModified)
		case "/trailer":
			w.Header().Set("Trailer", "X-Sum")
			io.WriteString(w, "abc")
			w.(http.Flusher).Flush()
			w.Header().Set("X-Sum", "42")
		default:
			w.Header().Set("Content-Length", "5")
			io.WriteString(w, "hello")
		}
	})
	px := proxyTo(t, up.URL, "")
	c := px.Client()
	steps := []struct{ method, path, want string }{
		{http.MethodHead, "/h", "200 "},
		{http.MethodGet, "/204", "204 "},
		{http.MethodGet, "/304", "304 "},
		{http.MethodGet, "/g", "200 hello"},
		{http.MethodHead, "/h", "200 "},
		{http.MethodGet, "/g", "200 hello"},
	}
	for _, s := range steps {
		code, body := get(t, c, s.method, px.URL+s.path)
		if got := fmt.Sprintf("%d %s", code, body); got != s.want {
			t.Errorf("%s %s: %q, want %q", s.method, s.path, got, s.want)
		}
	}
	if n := up.conns.Load(); n != 1 {
		t.Errorf("upstream connections: %d, want 1", n)
	}
	resp, err := c.Get(px.URL + "/trailer")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "abc" || resp.Trailer.Get("X-Sum") != "42" {
		t.Errorf("trailer response: body %q, X-Sum %q; want abc, 42", b, resp.Trailer.Get("X-Sum"))
	}
}

// A client that stops reading a large body midway: the upstream
// connection still holding the rest is closed, never reused for the next
// request (which would read the old body's rest as its response).
func TestTransportAbandonedBodyNotReused(t *testing.T) {
	big := strings.Repeat("x", 4<<20)
	up := newCountedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			io.WriteString(w, big)
			return
		}
		io.WriteString(w, "small")
	})
	px := proxyTo(t, up.URL, "")
	// Its own client: its connection to the proxy is dropped with the body.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	resp, err := c.Get(px.URL + "/big")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1024)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	tr.CloseIdleConnections()
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; ; i++ {
		code, body := get(t, px.Client(), http.MethodGet, px.URL+"/small")
		if code != 200 || body != "small" {
			t.Fatalf("after an abandoned body: %d %q, want 200 \"small\"", code, body)
		}
		if i >= 3 || time.Now().After(deadline) {
			break
		}
	}
	if n := up.conns.Load(); n != 2 {
		t.Errorf("upstream connections: %d, want 2 (the abandoned one closed)", n)
	}
}
