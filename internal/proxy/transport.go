package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"sync"
	"time"

	"rlproxy/internal/h1"
)

// maxResponseHeaderBytes bounds each upstream response header (status
// line and fields, 1 MiB) on both paths of an upstream's transport; a
// larger one is a 502. nginx's proxy_buffer_size (4–8 KiB) is stricter;
// http.Transport's default is 10 MB.
const maxResponseHeaderBytes = 1 << 20

// directTransport is the transport of a plain-HTTP upstream: an
// http.RoundTripper that writes a body-less GET or HEAD and reads its
// response header on the calling goroutine, over a pool of idle HTTP/1.1
// keep-alive connections. Every other request (a body, another method, an
// Upgrade or Expect header, an https upstream) goes to the wrapped
// *http.Transport.
//
// Why: http.Transport gives each connection a read and a write goroutine
// and passes every request and response between them and the caller over
// channels — goroutine switches and allocations per round trip that a
// proxy with one request in flight per connection does not need; measured
// in bench/RESULTS.md. The wire format is the standard library's own
// (http.Request.Write, http.ReadResponse).
//
// What it keeps of http.Transport's behaviour for these requests:
//   - keep-alive reuse of at most MaxIdleConnsPerHost idle connections,
//     the most recently used first (so a surplus left by a burst goes
//     idle and is closed after IdleConnTimeout under a light load);
//   - a connection is reused only if nothing arrived on it while idle
//     (directConn.silent): bytes no request asked for — a stray or late
//     response, a 408 before closing — never reach the next client;
//   - a reused connection that the upstream closed while it was idle is
//     found out before any response byte arrives, and the request (GET and
//     HEAD are idempotent, RFC 9110 §9.2.2) goes again on another
//     connection, as http.Transport retries;
//   - ResponseHeaderTimeout bounds the wait for the response header;
//   - a cancelled request context (the client left) aborts the exchange
//     and closes the connection;
//   - 1xx informational responses go to the request's
//     httptrace.ClientTrace.Got1xxResponse (ReverseProxy forwards them);
//   - the body streams from the connection, which is reused only after
//     the body was read to its end and neither side asked for
//     Connection: close.
type directTransport struct {
	host          string // the upstream URL's host[:port], as requests carry it
	addr          string // host:port to dial
	dialer        *net.Dialer
	maxIdle       int           // idle connections kept at most
	idleTimeout   time.Duration // 0 = idle connections are kept
	headerTimeout time.Duration // 0 = no bound
	fallback      *http.Transport
	bypass        bool // every request goes to fallback (an h2c upstream)

	mu     sync.Mutex
	closed bool // Close was called
	// idle is a stack of idle connections, oldest first: get pops the
	// most recent, sweep closes expired ones from the bottom.
	idle []*directConn
	// janitor is armed while connections are idle: it closes the ones idle
	// for idleTimeout, as http.Transport's per-connection timers do.
	janitor *time.Timer
}

// directConn is one upstream connection with its buffers. It is the
// buffered reader's source, so a header size bound can be applied.
type directConn struct {
	t     *directTransport
	conn  net.Conn
	br    *bufio.Reader
	bw    *bufio.Writer
	limit int64        // bytes that may still be read (the header bound)
	since time.Time    // when it went idle
	probe h1.IdleProbe // stray bytes or a close while idle (silent)
}

// newDirectTransport returns the transport of upstream u (an http URL),
// taking its limits from fallback, which it uses for all other requests.
func newDirectTransport(u *url.URL, fallback *http.Transport) *directTransport {
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	return &directTransport{
		host:          u.Host,
		addr:          addr,
		dialer:        &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second},
		maxIdle:       fallback.MaxIdleConnsPerHost,
		idleTimeout:   fallback.IdleConnTimeout,
		headerTimeout: fallback.ResponseHeaderTimeout,
		fallback:      fallback,
	}
}

// RoundTrip implements http.RoundTripper.
func (t *directTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.handles(req) {
		return t.fallback.RoundTrip(req)
	}
	if err := req.Context().Err(); err != nil { // the client left already
		return nil, err
	}
	for {
		pc, reused, err := t.get(req.Context())
		if err != nil {
			return nil, err
		}
		resp, retry, err := pc.roundTrip(req, reused)
		if !retry {
			return resp, err
		}
	}
}

// handles reports whether req takes the direct path: a body-less GET or
// HEAD to this upstream over plain HTTP that asks for no upgrade and no
// 100-continue.
func (t *directTransport) handles(req *http.Request) bool {
	return !t.bypass && (req.Method == http.MethodGet || req.Method == http.MethodHead) &&
		req.URL.Scheme == "http" && req.URL.Host == t.host &&
		req.ContentLength == 0 && (req.Body == nil || req.Body == http.NoBody) &&
		req.Header["Upgrade"] == nil && req.Header["Expect"] == nil
}

// get returns an idle connection (reused) or dials a new one.
func (t *directTransport) get(ctx context.Context) (pc *directConn, reused bool, err error) {
	for {
		t.mu.Lock()
		if n := len(t.idle); n > 0 {
			pc = t.idle[n-1]
			t.idle[n-1] = nil
			t.idle = t.idle[:n-1]
		}
		t.mu.Unlock()
		if pc == nil {
			break
		}
		// Expired, or not silent since its last response (closed by the
		// upstream, or bytes no request asked for — a stray response must
		// never reach the next client): another one.
		if t.idleTimeout > 0 && time.Since(pc.since) >= t.idleTimeout || !pc.silent() {
			pc.conn.Close()
			pc = nil
			continue
		}
		return pc, true, nil
	}
	c, err := t.dialer.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, false, err
	}
	pc = &directConn{t: t, conn: c}
	pc.probe.Init(pc.conn)
	pc.br = bufio.NewReaderSize(pc, 4096)
	pc.bw = bufio.NewWriterSize(c, 4096)
	return pc, false, nil
}

// put returns pc to the idle pool; it closes pc when the pool is full or
// the transport is closed.
func (t *directTransport) put(pc *directConn) {
	t.mu.Lock()
	pc.since = time.Now() // under the lock: the stack stays ordered by idle time
	if t.closed || len(t.idle) >= t.maxIdle {
		t.mu.Unlock()
		pc.conn.Close()
		return
	}
	t.idle = append(t.idle, pc)
	if t.idleTimeout > 0 && t.janitor == nil {
		t.janitor = time.AfterFunc(t.idleTimeout, t.sweep)
	}
	t.mu.Unlock()
}

// sweep closes the connections idle for idleTimeout (the bottom of the
// stack, which is ordered by idle time) and re-arms itself for the oldest
// one left.
func (t *directTransport) sweep() {
	now := time.Now()
	t.mu.Lock()
	i := 0
	for i < len(t.idle) && now.Sub(t.idle[i].since) >= t.idleTimeout {
		i++
	}
	expired := make([]*directConn, i)
	copy(expired, t.idle[:i])
	n := copy(t.idle, t.idle[i:])
	clear(t.idle[n:])
	t.idle = t.idle[:n]
	t.janitor = nil
	if n > 0 && !t.closed {
		t.janitor = time.AfterFunc(t.idleTimeout-now.Sub(t.idle[0].since), t.sweep)
	}
	t.mu.Unlock()
	for _, pc := range expired {
		pc.conn.Close()
	}
}

// Close closes the idle connections of both transports and makes every
// connection that becomes idle later close: the Runtime that owns t is
// no longer served (a reload replaced it).
func (t *directTransport) Close() {
	t.mu.Lock()
	t.closed = true
	idle := t.idle
	t.idle = nil
	if t.janitor != nil {
		t.janitor.Stop()
		t.janitor = nil
	}
	t.mu.Unlock()
	for _, pc := range idle {
		pc.conn.Close()
	}
	t.fallback.CloseIdleConnections()
}

// errStaleConn is a reused connection that ended before any response byte.
var errStaleConn = errors.New("upstream closed an idle connection")

// aLongTimeAgo is a deadline in the past: it makes blocked I/O return now.
var aLongTimeAgo = time.Unix(1, 0)

// Read is the buffered reader's source: the connection, within limit.
func (pc *directConn) Read(p []byte) (int, error) {
	if pc.limit <= 0 {
		return 0, fmt.Errorf("upstream response header larger than %d bytes", maxResponseHeaderBytes)
	}
	if int64(len(p)) > pc.limit {
		p = p[:pc.limit]
	}
	n, err := pc.conn.Read(p)
	pc.limit -= int64(n)
	return n, err
}

// roundTrip sends req on pc and reads its response header. retry is true
// when nothing came back on a reused connection (the upstream closed it
// while it was idle): the request may go again on another one.
func (pc *directConn) roundTrip(req *http.Request, reused bool) (resp *http.Response, retry bool, err error) {
	ctx := req.Context()
	stop := context.AfterFunc(ctx, func() { _ = pc.conn.SetDeadline(aLongTimeAgo) })
	abort := func(err error) (*http.Response, bool, error) {
		stop()
		pc.conn.Close()
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		if isTimeout(err) {
			return nil, false, fmt.Errorf("timeout awaiting the upstream response header (%v): %w", pc.t.headerTimeout, err)
		}
		return nil, false, err
	}
	stale := func() (*http.Response, bool, error) {
		stop()
		pc.conn.Close()
		return nil, true, errStaleConn
	}
	if d := pc.t.headerTimeout; d > 0 {
		_ = pc.conn.SetReadDeadline(time.Now().Add(d))
	}
	pc.limit = maxResponseHeaderBytes
	// A write error on a reused connection is a stale one too (a header
	// over the 4 KiB buffer reaches the socket within Write).
	err = req.Write(pc.bw)
	if err == nil {
		err = pc.bw.Flush()
	}
	if err != nil {
		if reused && ctx.Err() == nil {
			return stale()
		}
		return abort(err)
	}
	if _, err := pc.br.Peek(1); err != nil {
		if reused && ctx.Err() == nil && !isTimeout(err) {
			return stale()
		}
		return abort(err)
	}
	for {
		resp, err = http.ReadResponse(pc.br, req)
		if err != nil {
			return abort(err)
		}
		code := resp.StatusCode
		if code < 100 || code > 199 {
			break
		}
		if code == http.StatusSwitchingProtocols {
			return abort(errors.New("upstream switched protocols without an upgrade request"))
		}
		if trace := httptrace.ContextClientTrace(ctx); trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(code, textproto.MIMEHeader(resp.Header)); err != nil {
				return abort(err)
			}
		}
		pc.limit = maxResponseHeaderBytes // each response header has the bound, as in http.Transport
	}
	pc.limit = math.MaxInt64
	if pc.t.headerTimeout > 0 {
		_ = pc.conn.SetReadDeadline(time.Time{})
		// A cancellation whose deadline the line above just cleared
		// would be lost and the body read unbounded.
		if ctx.Err() != nil {
			return abort(ctx.Err())
		}
	}
	keep := !resp.Close && !req.Close
	if resp.Body == http.NoBody {
		pc.done(stop, keep)
		return resp, false, nil
	}
	resp.Body = &directBody{rc: resp.Body, pc: pc, stop: stop, keep: keep, ctx: ctx}
	return resp, false, nil
}

// done ends an exchange: the connection goes back to the pool when keep is
// true and the request context did not abort it, else it is closed.
func (pc *directConn) done(stop func() bool, keep bool) {
	if stop() && keep {
		pc.t.put(pc)
		return
	}
	pc.conn.Close()
}

// directBody is a response body read from its connection; the connection
// is released when the body ends or is closed. Close may run while a Read
// waits (a read_timeout expiry): it closes the connection, which ends the
// Read.
type directBody struct {
	// ctx is the request's: once it is done, roundTrip's AfterFunc has cut
	// the connection on purpose.
	ctx  context.Context
	rc   io.ReadCloser
	pc   *directConn
	stop func() bool
	keep bool // immutable after roundTrip
	once sync.Once
}

// Read implements io.Reader; at the body's end the connection is released.
func (b *directBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.release(b.keep)
	case err != nil && b.ctx.Err() != nil:
		// The client left and the deadline in the past that cut the
		// connection reads as "i/o timeout": say what happened, as
		// http.Transport does (ReverseProxy does not log it).
		err = context.Canceled
	}
	return n, err
}

// Close releases the connection: for reuse when the body was read to its
// end (Read released it already), closed otherwise (its unread rest would
// be the next response).
func (b *directBody) Close() error {
	b.release(false)
	return nil
}

func (b *directBody) release(keep bool) {
	b.once.Do(func() {
		if !keep {
			// First, so closing an unfinished body does not read its rest.
			b.pc.conn.Close()
		}
		_ = b.rc.Close()
		b.pc.done(b.stop, keep)
	})
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// silent reports whether the idle connection pc received nothing since its
// last exchange: nothing buffered, no stray bytes and no FIN on its socket
// (h1.IdleProbe: one non-blocking read, no waiting).
func (pc *directConn) silent() bool { return pc.br.Buffered() == 0 && pc.probe.Quiet() }
