package server

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"rlproxy/internal/config"
	"rlproxy/internal/metrics"
	"rlproxy/internal/testutil/waitfor"
)

// limitsServe serves h on a limitListener with server section s and
// returns its address and counters.
func limitsServe(t *testing.T, s config.Server, h http.Handler) (string, metrics.ListenerCounters) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.NewListeners(prometheus.NewRegistry()).For("public")
	hs := &http.Server{Handler: h}
	go func() { _ = hs.Serve(newLimitListener(ln, s, m, slog.New(slog.DiscardHandler))) }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String(), m
}

// limitsDial connects with a small receive buffer (set before connect, so
// the advertised window stays small) and sends GET path.
func limitsDial(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

// streamer writes n bytes in 32 KiB writes and reports the first write
// error (nil when all were written) on done.
func streamer(n int, done chan<- error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 32<<10)
		var err error
		for sent := 0; sent < n && err == nil; sent += len(buf) {
			_, err = w.Write(buf)
		}
		done <- err
	})
}

// TestWriteTimeoutCutsNonReader: a client that never reads is cut once a
// write has blocked for write_timeout (the handler's write fails, the
// connection is closed and counted), not before.
func TestWriteTimeoutCutsNonReader(t *testing.T) {
	done := make(chan error, 1)
	addr, m := limitsServe(t, config.Server{WriteTimeout: 300 * time.Millisecond, MaxConnections: 10}, streamer(1<<30, done))
	c := limitsDial(t, addr, "/")
	start := time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, syscall.ECONNRESET) && !strings.Contains(err.Error(), "timeout") && !strings.Contains(err.Error(), "closed") {
			t.Errorf("handler write error %v, want a timeout", err)
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Errorf("cut after %v, before write_timeout", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("non-reading client not cut in 10 s")
	}
	// The client reads what the kernel buffered, then the end.
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("reading the cut connection: %v, want its end", err)
	}
	if got := value(m.WriteTimeouts); got != 1 {
		t.Errorf("write timeouts %v, want 1", got)
	}
	waitGauge(t, m.Open, 0)
}

// TestWriteTimeoutIsPerWrite: a client reading slowly but steadily (a
// chunk every 100 ms) gets a response that takes far longer than
// write_timeout (400 ms) in full: the deadline bounds one write, not the
// whole response (nginx send_timeout).
func TestWriteTimeoutIsPerWrite(t *testing.T) {
	const size = 512 << 10
	done := make(chan error, 1)
	addr, m := limitsServe(t, config.Server{WriteTimeout: 400 * time.Millisecond, MaxConnections: 10}, streamer(size, done))
	c := limitsDial(t, addr, "/")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var got int
	buf := make([]byte, 16<<10)
	for {
		n, err := io.ReadFull(resp.Body, buf)
		got += n
		if err != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got != size {
		t.Fatalf("read %d bytes, want %d", got, size)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("the response took %v; the test needs it much longer than write_timeout", d)
	}
	if err := <-done; err != nil {
		t.Errorf("handler write error %v, want none", err)
	}
	if n := value(m.WriteTimeouts); n != 0 {
		t.Errorf("write timeouts %v, want 0", n)
	}
}

// deadlineCounter counts the write deadlines set on its connection.
type deadlineCounter struct {
	net.Conn
	n int
}

func (c *deadlineCounter) SetWriteDeadline(t time.Time) error {
	c.n++
	return c.Conn.SetWriteDeadline(t)
}

// TestWriteDeadlineMovesRarely: writes in quick succession set the write
// deadline once (it is moved only when less than write_timeout is left),
// and net/http clearing it between requests does not undo it; a write
// after write_timeout/8 has passed moves it again, and so does one after
// another deadline was set or after a reload shortened the timeout.
func TestWriteDeadlineMovesRarely(t *testing.T) {
	server, client := loopbackPair(t)
	go func() { _, _ = io.Copy(io.Discard, client) }()
	l := newLimitListener(nil, config.Server{WriteTimeout: 2 * time.Second, MaxConnections: 1},
		metrics.NewListeners(prometheus.NewRegistry()).For("public"), slog.New(slog.DiscardHandler))
	dc := &deadlineCounter{Conn: server}
	c := &limitConn{Conn: dc, l: l}
	write := func() {
		t.Helper()
		if _, err := c.Write([]byte("0123456789")); err != nil {
			t.Fatal(err)
		}
	}
	for range 1000 { // well within the 250 ms slack
		write()
	}
	if dc.n != 1 {
		t.Fatalf("1000 writes set the deadline %d times, want 1", dc.n)
	}
	// 400 ms pass for armWrite (which reads the clock only as time since
	// l.epoch): past the 250 ms slack, less than 2 s left.
	l.epoch = l.epoch.Add(-400 * time.Millisecond)
	write()
	if dc.n != 2 {
		t.Errorf("a write 400 ms later: %d deadlines set, want 2", dc.n)
	}
	_ = c.SetWriteDeadline(time.Time{}) // net/http's after each request: ours stays
	write()
	if dc.n != 2 {
		t.Errorf("a write after clearing the deadline: %d deadlines set, want 2", dc.n)
	}
	_ = c.SetWriteDeadline(time.Now().Add(time.Hour)) // someone else's
	write()
	if dc.n != 4 {
		t.Errorf("a write after another deadline: %d deadlines set, want 4", dc.n)
	}
	l.writeTimeout.Store(int64(500 * time.Millisecond)) // a reload
	write()
	if dc.n != 5 {
		t.Errorf("a write after write_timeout shrank: %d deadlines set, want 5", dc.n)
	}
	l.writeTimeout.Store(0) // a reload to off: the next write clears ours, once
	write()
	write()
	if dc.n != 6 {
		t.Errorf("writes after write_timeout went to 0: %d deadlines set, want 6", dc.n)
	}
	_ = c.SetWriteDeadline(time.Time{}) // off: a clear is a clear
	if dc.n != 7 {
		t.Errorf("clearing with write_timeout off: %d deadlines set, want 7", dc.n)
	}
}

// TestWriteTimeoutReloadedOff: a keep-alive connection served with a
// write_timeout keeps working after a reload turns it off, past the
// deadline the last response armed (that deadline must not fail the
// next response).
func TestWriteTimeoutReloadedOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.NewListeners(prometheus.NewRegistry()).For("public")
	l := newLimitListener(ln, config.Server{WriteTimeout: 200 * time.Millisecond, MaxConnections: 10}, m, slog.New(slog.DiscardHandler))
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() { _ = hs.Close() })
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	t.Cleanup(client.CloseIdleConnections)
	get := func() {
		t.Helper()
		resp, err := client.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	get()
	l.set(config.Server{WriteTimeout: 0, MaxConnections: 10})
	time.Sleep(400 * time.Millisecond) // past the first response's 225 ms deadline
	get()
	if n := value(m.WriteTimeouts); n != 0 {
		t.Errorf("write timeouts %v, want 0", n)
	}
	if n := value(m.Open); n != 1 {
		t.Errorf("open connections %v, want 1 (the keep-alive one reused)", n)
	}
}

// loopbackPair returns both ends of a loopback TCP connection.
func loopbackPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if server, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	return server, client
}

// TestMaxConnections: with 3 connections busy (a request in progress)
// the 4th is closed at accept and counted; once one closes, a new one is
// served. (Idle ones give way instead: TestReclaimOldestIdleFirst.)
func TestMaxConnections(t *testing.T) {
	b := &blocker{release: make(chan struct{})}
	l, addr, m := connsServe(t, config.Server{MaxConnections: 3, MaxConnectionsPerClient: off()}, b)
	var held []net.Conn
	for range 3 {
		c := dialFrom(t, "127.0.0.1", addr)
		if _, err := io.WriteString(c, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	waitUntil(t, "three busy", func() bool { return value(m.Open) == 3 && phaseLen(l, phaseNoRequest) == 0 })
	// The reset may reach the client before its connect returns.
	if c, err := net.Dial("tcp", addr); err == nil {
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, syscall.ETIMEDOUT) || strings.Contains(err.Error(), "timeout") {
			t.Fatalf("4th connection: read %v, want it closed at once", err)
		}
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("4th connection: %v, want it reset or closed at once", err)
	}
	if got := value(m.Refused); got != 1 {
		t.Errorf("refused %v, want 1", got)
	}
	held[0].Close()
	waitGauge(t, m.Open, 2)
	close(b.release)
	if err := limitsGet(&http.Client{}, addr); err != nil {
		t.Errorf("after one closed: %v", err)
	}
}

func limitsGet(c *http.Client, addr string) error {
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}

// waitGauge waits up to 5 s for g to read want.
func waitGauge(t *testing.T, g prometheus.Gauge, want float64) {
	t.Helper()
	if !waitfor.Poll(5*time.Second, func() bool { return value(g) == want }) {
		t.Fatalf("open connections %v, want %v", value(g), want)
	}
}

// TestDeriveMaxConnections: half of the open-file limit after the reserve.
func TestDeriveMaxConnections(t *testing.T) {
	for _, tt := range []struct {
		nofile uint64
		want   int
	}{{20000, 9744}, {1024, 384}, {1 << 20, 524032}, {16, 6}, {1, 1}} {
		if got := deriveMaxConnections(tt.nofile); got != tt.want {
			t.Errorf("deriveMaxConnections(%d) = %d, want %d", tt.nofile, got, tt.want)
		}
	}
}

// value reads a gauge's or counter's current value.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}

// limitsH2 serves h over TLS with HTTP/2, under streamDeadlines with
// write_timeout 300 ms, and returns a client for it.
func limitsH2(t *testing.T, h http.Handler) (*httptest.Server, *http.Client) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	l := newLimitListener(srv.Listener, config.Server{WriteTimeout: 300 * time.Millisecond, MaxConnections: 10},
		metrics.NewListeners(prometheus.NewRegistry()).For("public"), slog.New(slog.DiscardHandler))
	srv.Listener = l
	srv.Config.Handler = l.streamDeadlines(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, srv.Client()
}

// TestWriteTimeoutHTTP2Stream: an HTTP/2 client that stops reading one
// stream stalls it by flow control, not the connection; the stream's write
// is cut after write_timeout all the same.
func TestWriteTimeoutHTTP2Stream(t *testing.T) {
	done := make(chan error, 1)
	srv, c := limitsH2(t, streamer(1<<30, done))
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("protocol %s, want HTTP/2", resp.Proto)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("the stalled stream's write succeeded, want it cut")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stalled HTTP/2 stream not cut in 10 s")
	}
}

// TestWriteTimeoutHTTP2Quiet: a stream with nothing to send for longer than
// write_timeout (600 ms of 300) is not cut: the deadline covers writes only.
func TestWriteTimeoutHTTP2Quiet(t *testing.T) {
	done := make(chan error, 1)
	srv, c := limitsH2(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_, err := io.WriteString(w, "a")
		if err == nil {
			err = rc.Flush()
		}
		time.Sleep(600 * time.Millisecond)
		if err == nil {
			_, err = io.WriteString(w, "b")
		}
		done <- err
	}))
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "ab" {
		t.Errorf("body %q, %v; want \"ab\"", body, err)
	}
	if err := <-done; err != nil {
		t.Errorf("handler: %v, want no error", err)
	}
}
