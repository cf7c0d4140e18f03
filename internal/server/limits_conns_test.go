package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rlproxy/internal/config"
	"rlproxy/internal/metrics"
	"rlproxy/internal/testutil/waitfor"
)

// connsServe serves h (HTTP/1.1 and h2c) on a limitListener with server
// section s, its ConnState hook and, when s has PROXY protocol, the
// PROXY-header admission, as listenPublic builds them.
func connsServe(t *testing.T, s config.Server, h http.Handler) (*limitListener, string, metrics.ListenerCounters) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.NewListeners(prometheus.NewRegistry()).For("public")
	l := newLimitListener(ln, s, m, slog.New(slog.DiscardHandler))
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	hs := &http.Server{Handler: h, ConnState: l.trackState, Protocols: p}
	go func() { _ = hs.Serve(l.admitAfterProxy(withProxyProtocol(l, s.ProxyProtocol))) }()
	t.Cleanup(func() { _ = hs.Close() })
	return l, ln.Addr().String(), m
}

// dialFrom connects to addr from the loopback address ip (Linux accepts
// any 127.0.0.0/8 source).
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip sends GET path on c and reads the response's status; an error
// when the connection was closed instead.
func roundTrip(c net.Conn, br *bufio.Reader, path string) (int, error) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

// waitClosed waits up to 10 s for the server to close c.
func waitClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: read %v, want the connection closed", what, err)
	}
}

// waitUntil waits (waitfor.True) for cond.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.True(t, what, cond)
}

// phaseLen counts l's connections listed in phase p.
func phaseLen(l *limitListener, p connPhase) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for c := l.list(p).head; c != nil; c = c.next {
		n++
	}
	return n
}

// blocker is a handler that holds /block requests until release is closed.
type blocker struct {
	release chan struct{}
}

func (b *blocker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/block" {
		select {
		case <-b.release:
		case <-r.Context().Done(): // the client left
		}
	}
	_, _ = io.WriteString(w, "ok")
}

func off() *int { n := 0; return &n }

// TestReclaimOldestIdleFirst: at max_connections 3 a new connection is
// admitted by closing the idle keep-alive one, then the ones that sent no
// request, oldest first; with every connection busy the next is refused.
func TestReclaimOldestIdleFirst(t *testing.T) {
	b := &blocker{release: make(chan struct{})}
	defer close(b.release)
	l, addr, m := connsServe(t, config.Server{MaxConnections: 3, MaxConnectionsPerClient: off()}, b)

	idle := dialFrom(t, "127.0.0.1", addr)
	if code, err := roundTrip(idle, bufio.NewReader(idle), "/"); code != 200 {
		t.Fatalf("first request: %d %v", code, err)
	}
	waitUntil(t, "the first connection idle", func() bool { return phaseLen(l, phaseIdle) == 1 })
	silent := dialFrom(t, "127.0.0.1", addr)
	waitUntil(t, "the silent connection listed", func() bool { return phaseLen(l, phaseNoRequest) == 1 })
	busy := dialFrom(t, "127.0.0.1", addr)
	_, _ = io.WriteString(busy, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	waitUntil(t, "three open", func() bool { return value(m.Open) == 3 && phaseLen(l, phaseNoRequest) == 1 })

	// The 4th: the idle one gives way.
	fourth := dialFrom(t, "127.0.0.1", addr)
	_, _ = io.WriteString(fourth, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	waitClosed(t, idle, "the idle connection")
	// The 5th: the silent one (no request head) gives way.
	fifth := dialFrom(t, "127.0.0.1", addr)
	waitClosed(t, silent, "the silent connection")
	waitUntil(t, "the 5th listed", func() bool { return phaseLen(l, phaseNoRequest) == 1 })
	_, _ = io.WriteString(fifth, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	waitUntil(t, "three busy", func() bool { return phaseLen(l, phaseNoRequest) == 0 && value(m.Open) == 3 })
	// All three busy: the 6th is refused.
	if sixth, err := net.Dial("tcp", addr); err == nil { // the reset may come before connect returns
		defer sixth.Close()
		waitClosed(t, sixth, "the 6th connection")
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatal(err)
	}
	if got := [4]float64{value(m.ReclaimedIdle), value(m.ReclaimedNoRequest), value(m.Refused), value(m.Open)}; got != [4]float64{1, 1, 1, 3} {
		t.Errorf("reclaimed idle, no_request, refused, open = %v, want [1 1 1 3]", got)
	}
}

// TestPerClientCap: 1,000 connections from one address under a cap of 10:
// 10 served, 990 refused and counted apart from max_connections'
// refusals; a second address is unaffected; closing one admitted
// connection admits one more; a reload lowering the cap applies to the
// connections already open.
func TestPerClientCap(t *testing.T) {
	ten := 10
	l, addr, m := connsServe(t, config.Server{MaxConnections: 5000, MaxConnectionsPerClient: &ten}, &blocker{})
	conns := make([]net.Conn, 1000)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	for i := range conns {
		c, err := d.Dial("tcp", addr)
		if err != nil && !errors.Is(err, syscall.ECONNRESET) { // a reset may come before connect returns
			t.Fatal(err)
		}
		if c != nil {
			conns[i] = c
			t.Cleanup(func() { _ = c.Close() })
		}
	}
	waitUntil(t, "990 refused", func() bool { return value(m.ClientRefused) == 990 })
	served, admitted := 0, -1
	for i, c := range conns {
		if c == nil {
			continue
		}
		if code, _ := roundTrip(c, bufio.NewReader(c), "/"); code == 200 {
			served++
			admitted = i
		}
	}
	if served != 10 || value(m.Refused) != 0 || value(m.Open) != 10 {
		t.Fatalf("served %d, refused by max_connections %v, open %v; want 10, 0, 10", served, value(m.Refused), value(m.Open))
	}
	for range 10 { // one at a time: all admitted
		c := dialFrom(t, "127.0.0.3", addr)
		if code, err := roundTrip(c, bufio.NewReader(c), "/"); code != 200 {
			t.Fatalf("second address: %d %v", code, err)
		}
	}
	conns[admitted].Close()
	waitUntil(t, "one closed", func() bool { return value(m.Open) == 19 })
	c := dialFrom(t, "127.0.0.2", addr)
	if code, err := roundTrip(c, bufio.NewReader(c), "/"); code != 200 {
		t.Fatalf("after one closed: %d %v", code, err)
	}
	five := 5
	l.set(config.Server{MaxConnections: 5000, MaxConnectionsPerClient: &five})
	// 10 open from there; the reset may come before connect returns.
	if c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}).Dial("tcp", addr); err == nil {
		defer c.Close()
		if code, err := roundTrip(c, bufio.NewReader(c), "/"); err == nil {
			t.Errorf("over a cap reloaded to 5: %d, want the connection closed", code)
		}
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatal(err)
	}
	if got := value(m.ClientRefused); got != 991 {
		t.Errorf("refused per client %v, want 991", got)
	}
}

// TestPerClientCapHTTP2: an HTTP/2 connection counts once, whatever its
// streams: 20 concurrent streams on each of 2 connections pass a cap of 2,
// and a third connection is refused.
func TestPerClientCapHTTP2(t *testing.T) {
	two := 2
	b := &blocker{release: make(chan struct{})}
	_, addr, m := connsServe(t, config.Server{MaxConnections: 100, MaxConnectionsPerClient: &two}, b)
	h2c := func() *http.Client {
		p := new(http.Protocols)
		p.SetUnencryptedHTTP2(true)
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.4")}}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Protocols: p, DialContext: d.DialContext, MaxConnsPerHost: 1}}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for range 2 {
		c := h2c()
		// One request first: the streams below share its connection.
		if resp, err := c.Get("http://" + addr + "/"); err != nil {
			t.Fatal(err)
		} else {
			resp.Body.Close()
		}
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := c.Get("http://" + addr + "/block")
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.ProtoMajor != 2 {
					errs <- fmt.Errorf("HTTP/%d", resp.ProtoMajor)
				}
			}()
		}
	}
	waitUntil(t, "two connections open", func() bool { return value(m.Open) == 2 })
	if _, err := h2c().Get("http://" + addr + "/"); err == nil {
		t.Error("a third HTTP/2 connection was served, want it refused")
	}
	close(b.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("stream: %v", err)
	}
	if got := [2]float64{value(m.ClientRefused), value(m.Open)}; got != [2]float64{1, 2} {
		t.Errorf("refused per client, open = %v, want [1 2]", got)
	}
}

// TestPerClientCapProxyProtocol: behind a PROXY protocol balancer the cap
// counts the address of the header, not the balancer's; a peer in
// real_ip.trusted_proxies is not capped.
func TestPerClientCapProxyProtocol(t *testing.T) {
	two := 2
	s := config.Server{MaxConnections: 100, MaxConnectionsPerClient: &two,
		ProxyProtocol: &config.ProxyProtocol{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}
	l, addr, m := connsServe(t, s, &blocker{})
	l.trust([]netip.Prefix{netip.MustParsePrefix("127.0.0.9/32")})
	get := func(src, client string) int {
		c := dialFrom(t, src, addr)
		if client != "" {
			_, _ = fmt.Fprintf(c, "PROXY TCP4 %s 127.0.0.1 5000 80\r\n", client)
		}
		code, _ := roundTrip(c, bufio.NewReader(c), "/")
		return code
	}
	var got []int
	for _, client := range []string{"10.0.0.1", "10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.2"} {
		got = append(got, get("127.0.0.1", client))
	}
	for range 3 {
		got = append(got, get("127.0.0.9", "")) // a trusted proxy, no header
	}
	if want := []int{200, 200, 0, 200, 200, 200, 200, 200}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
	if v := value(m.ClientRefused); v != 1 {
		t.Errorf("refused per client %v, want 1", v)
	}
}

// TestClientKey: IPv6 addresses count by /64, IPv4-mapped ones as IPv4.
func TestClientKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7":           "192.0.2.7",
		"::ffff:192.0.2.7":    "192.0.2.7",
		"2001:db8::1":         "2001:db8::",
		"2001:db8::ffff:1:2":  "2001:db8::",
		"2001:db8:0:1::1":     "2001:db8:0:1::",
		"fe80::1234:5678:9:a": "fe80::",
	} {
		got, ok := clientKey(&net.TCPAddr{IP: net.ParseIP(in), Port: 1})
		if !ok || got.String() != want {
			t.Errorf("clientKey(%s) = %v %v, want %s", in, got, ok, want)
		}
	}
}

// TestDerivePerClient: an eighth of max_connections, at least 64 unless
// that is over half of it.
func TestDerivePerClient(t *testing.T) {
	for limit, want := range map[int]int{1: 1, 2: 1, 3: 1, 10: 5, 100: 50, 128: 64, 400: 64, 512: 64, 600: 75, 9744: 1218, 100000: 12500} {
		if got := derivePerClient(limit); got != want {
			t.Errorf("derivePerClient(%d) = %d, want %d", limit, got, want)
		}
	}
}

// BenchmarkTrackState: the ConnState hook's cost per request (one move to
// busy and one back to idle), allocation-free.
func BenchmarkTrackState(b *testing.B) {
	l := newLimitListener(nil, config.Server{MaxConnections: 10}, metrics.NewListeners(prometheus.NewRegistry()).For("public"), slog.New(slog.DiscardHandler))
	server, client := net.Pipe()
	defer server.Close()
	defer client.Close()
	c := &limitConn{Conn: server, l: l}
	var nc net.Conn = c
	b.ReportAllocs()
	for b.Loop() {
		l.trackState(nc, http.StateActive)
		l.trackState(nc, http.StateIdle)
	}
}

// TestReclaimHTTP2OverTLS: an HTTP/2 connection over TLS with no stream
// open is idle and gives way at max_connections 1; one with a stream in
// progress does not, and the next connection is refused.
func TestReclaimHTTP2OverTLS(t *testing.T) {
	b := &blocker{release: make(chan struct{})}
	defer close(b.release)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.NewListeners(prometheus.NewRegistry()).For("public")
	l := newLimitListener(ln, config.Server{MaxConnections: 1, MaxConnectionsPerClient: off()}, m, slog.New(slog.DiscardHandler))
	srv := httptest.NewUnstartedServer(b)
	srv.Listener.Close()
	srv.Listener, srv.EnableHTTP2 = l, true
	srv.Config.ConnState = l.trackState
	srv.StartTLS()
	defer srv.Close()
	client := func() *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: srv.Client().Transport.(*http.Transport).Clone()}
	}
	first := client()
	resp, err := first.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("HTTP/%d, want HTTP/2", resp.ProtoMajor)
	}
	waitUntil(t, "the HTTP/2 connection idle", func() bool { return phaseLen(l, phaseIdle) == 1 })
	second := client()
	if resp, err = second.Get(srv.URL + "/"); err != nil {
		t.Fatalf("a second connection at the cap: %v, want the idle one to give way", err)
	}
	resp.Body.Close()
	done := make(chan error, 1)
	go func() {
		resp, err := second.Get(srv.URL + "/block")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	waitUntil(t, "a stream in progress", func() bool { return phaseLen(l, phaseIdle) == 0 && phaseLen(l, phaseNoRequest) == 0 })
	if _, err := client().Get(srv.URL + "/"); err == nil {
		t.Error("a third connection was served while the only one had a stream in progress")
	}
	if got := [3]float64{value(m.ReclaimedIdle), value(m.ReclaimedNoRequest), value(m.Refused)}; got != [3]float64{1, 0, 1} {
		t.Errorf("reclaimed idle, no_request, refused = %v, want [1 0 1]", got)
	}
	b.release <- struct{}{}
	if err := <-done; err != nil {
		t.Errorf("the stream in progress: %v", err)
	}
}
