package h1

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"

	"rlproxy/internal/testutil/memconn"
)

// blockingUpstream is an in-memory upstream connection for net/http's
// Transport, whose read loop waits on it: Read blocks until a request
// head was written, then serves upstreamReply.
type blockingUpstream struct {
	memconn.Conn
	mu      sync.Mutex
	cond    *sync.Cond
	pending []byte // the reply not yet read
	closed  bool
}

func newBlockingUpstream() *blockingUpstream {
	u := &blockingUpstream{}
	u.cond = sync.NewCond(&u.mu)
	return u
}

func (u *blockingUpstream) Read(p []byte) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for len(u.pending) == 0 && !u.closed {
		u.cond.Wait()
	}
	if u.closed {
		return 0, io.EOF
	}
	k := copy(p, u.pending)
	u.pending = u.pending[k:]
	return k, nil
}

func (u *blockingUpstream) Write(p []byte) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if bytes.HasSuffix(p, []byte("\r\n\r\n")) {
		u.pending = append(u.pending, upstreamReply...)
		u.cond.Signal()
	}
	return len(p), nil
}

func (u *blockingUpstream) Close() error {
	u.mu.Lock()
	u.closed = true
	u.cond.Broadcast()
	u.mu.Unlock()
	return nil
}

// oneConnListener hands out one connection, then blocks until closed.
type oneConnListener struct {
	c    chan net.Conn
	done chan struct{}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.c:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}
func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return &net.TCPAddr{} }

// closeNotify is a client memconn.Conn that reports its Close, and whose
// Read, once every request is sent, waits for the last answer (net/http
// cancels a request whose client has gone).
type closeNotify struct {
	memconn.Conn
	want     int // answers to wait for
	answered chan struct{}
	closed   chan struct{}
}

func (c *closeNotify) Read(p []byte) (int, error) {
	if c.Drained() {
		<-c.answered
	}
	return c.Conn.Read(p)
}

func (c *closeNotify) Write(p []byte) (int, error) {
	c.want -= bytes.Count(p, []byte("HTTP/1.1 200 OK\r\n"))
	if c.want == 0 {
		close(c.answered)
	}
	return len(p), nil
}

func (c *closeNotify) Close() error { close(c.closed); return nil }

// benchStd is benchProxy's work on today's path: net/http's server and
// httputil.ReverseProxy over the same in-memory connections, for
// comparison.
func benchStd(b *testing.B, req string) {
	dials := 0
	target, _ := url.Parse("http://upstream")
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.BufferPool = &bufferPool{} // as internal/proxy does: no 32 KiB copy buffer per response
	rp.Transport = &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { dials++; return newBlockingUpstream(), nil },
		MaxIdleConnsPerHost: 1}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("X-Real-IP", "192.0.2.1")
		r.Header.Set("X-Request-Id", "0123456789abcdef")
		w.Header().Set("RateLimit-Policy", `"default";q=100;w=60`)
		w.Header().Set("RateLimit", `"default";r=99;t=60`)
		rp.ServeHTTP(w, r)
	})
	l := &oneConnListener{c: make(chan net.Conn, 1), done: make(chan struct{})}
	srv := &http.Server{Handler: handler}
	go srv.Serve(l)
	defer close(l.done)
	run := func(n int) {
		c := &closeNotify{Conn: memconn.Conn{Msg: []byte(req), N: n}, want: n,
			answered: make(chan struct{}), closed: make(chan struct{})}
		l.c <- c
		<-c.closed
	}
	run(4)
	b.ReportAllocs()
	b.ResetTimer()
	run(b.N)
	b.StopTimer()
	b.ReportMetric(float64(dials), "dials")
}

// bufferPool is ReverseProxy's BufferPool over a sync.Pool.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(v []byte) { b.p.Put(&v) }

// BenchmarkStdGet10 is BenchmarkGet10 on net/http and ReverseProxy.
func BenchmarkStdGet10(b *testing.B) { benchStd(b, get10) }
