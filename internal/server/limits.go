package server

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"rlproxy/internal/config"
	"rlproxy/internal/metrics"
)

// limitListener bounds what clients can hold of the process (the client-side
// bounds): at most max open connections (server.max_connections;
// at the cap an idle connection is closed to admit a new one, and when
// none is idle the new one is closed at accept, so when file descriptors
// run short new clients are refused before upstream dials fail), at most
// perClient of them from one client (limits_conns.go), and no write
// to a client may block longer than writeTimeout (server.write_timeout, nginx
// send_timeout). All are read on every use, so a reload changes them for
// new connections and new writes.
//
// The write deadline is checked before every Write of the connection — the
// response writer's, HTTP/2's frame writer's, TLS records' and, after an
// Upgrade, ReverseProxy's copy to the client — so it bounds the time one
// write waits for the client to accept bytes, never a whole response: a
// slow download that keeps reading is not cut, a client that stops
// reading is, at the first write that blocks that long. A quiet upgraded
// connection (a WebSocket with nothing to send) writes nothing and is not
// cut: silence is legitimate there. Cutting the client fails the response
// copy; ReverseProxy then closes the upstream body, which closes that
// upstream connection (a body not read to its end is never reused), and the
// client's connection is reset rather than closed, releasing its socket
// buffers at once.
type limitListener struct {
	net.Listener
	max          atomic.Int64 // cap on open connections
	perClient    atomic.Int64 // cap on one client's; 0 = none
	writeTimeout atomic.Int64 // time.Duration; 0 = no write deadline
	open         atomic.Int64
	epoch        time.Time // limitConn.until counts from here (monotonic)
	m            metrics.ListenerCounters
	log          *slog.Logger
	// trusted is real_ip.trusted_proxies: peers the per-client cap spares.
	trusted atomic.Pointer[[]netip.Prefix]
	// deferAdmit: PROXY protocol is on, so the per-client cap is applied
	// after the header, by admitConn, not at accept.
	deferAdmit bool

	mu        sync.Mutex // guards the lists, clients and the limitConns' fields it names
	idle      connList   // keep-alive between requests, oldest first
	noRequest connList   // no complete request head yet, oldest first
	clients   map[netip.Addr]int32

	capLog, clientLog refusalLog
}

// refusalLog spaces the log lines about refused connections: the first,
// then at most one per refusalLogEvery with the count since the last.
type refusalLog struct {
	mu         sync.Mutex
	lastLogged time.Time
	unlogged   int
}

// refusalLogEvery spaces the log lines about refused connections: a flood
// must not become a log flood.
const refusalLogEvery = 10 * time.Second

// newLimitListener wraps ln with the bounds of s.
func newLimitListener(ln net.Listener, s config.Server, m metrics.ListenerCounters, log *slog.Logger) *limitListener {
	l := &limitListener{Listener: ln, epoch: time.Now(), m: m, log: log,
		deferAdmit: s.ProxyProtocol != nil, clients: map[netip.Addr]int32{}}
	l.set(s)
	return l
}

// set applies s's write_timeout, max_connections (0 = derived from the
// open-file limit, maxConnections) and max_connections_per_client (nil =
// derived from max_connections, derivePerClient).
func (l *limitListener) set(s config.Server) {
	l.writeTimeout.Store(int64(s.WriteTimeout))
	limit := s.MaxConnections
	if limit == 0 {
		limit = defaultMaxConnections()
	}
	l.max.Store(int64(limit))
	perClient := derivePerClient(limit)
	if s.MaxConnectionsPerClient != nil {
		perClient = *s.MaxConnectionsPerClient
	}
	l.perClient.Store(int64(perClient))
}

// trust sets the peers the per-client cap spares (real_ip.trusted_proxies).
func (l *limitListener) trust(p []netip.Prefix) { l.trusted.Store(&p) }

// Accept returns the next connection under the caps. At max_connections
// an idle connection is closed to make room (reclaim); when none is, the
// new one is closed at once (with a reset: no lingering socket) and
// counted, as is one over the per-client cap.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitConn{Conn: c, l: l}
		if !l.deferAdmit && !l.admit(lc, c.RemoteAddr()) {
			l.refuseClient(c) // before the total cap: nothing reclaimed for it
			continue
		}
		if l.open.Add(1) > l.max.Load() && !l.reclaim() {
			l.open.Add(-1)
			l.forget(lc)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			l.m.Refused.Inc() // before the close: a client seeing the reset sees the count
			l.capLog.note(l.log, "server.max_connections reached: closing new client connections",
				"max_connections", l.max.Load())
			_ = c.Close()
			continue
		}
		l.m.Open.Inc()
		l.mu.Lock()
		l.move(lc, phaseNoRequest)
		l.mu.Unlock()
		return lc, nil
	}
}

// note logs the first refusal and then at most one line per
// refusalLogEvery, with the count since the last line.
func (r *refusalLog) note(log *slog.Logger, msg, limitName string, limit int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unlogged++
	if now := time.Now(); now.Sub(r.lastLogged) >= refusalLogEvery {
		log.Warn(msg, limitName, limit, "refused", r.unlogged)
		r.lastLogged, r.unlogged = now, 0
	}
}

// limitConn is one client connection under a limitListener.
type limitConn struct {
	net.Conn
	l        *limitListener
	closed   atomic.Bool
	timedOut atomic.Bool
	// until is the write deadline armWrite last set, as time since
	// l.epoch (monotonic); 0 = none of ours (another was set since).
	until atomic.Int64

	// Guarded by l.mu (limits_conns.go).
	prev, next *limitConn // in l's list of its phase
	phase      connPhase
	gone       bool       // closed: never listed again
	client     netip.Addr // counted under this address when counted
	counted    bool
}

// writeSlack is how much further than write_timeout armWrite sets the
// deadline: 1/8 of it.
const writeSlack = 8

// Write makes the write deadline at least now + write_timeout, then writes.
func (c *limitConn) Write(p []byte) (int, error) {
	if d := time.Duration(c.l.writeTimeout.Load()); d > 0 {
		c.armWrite(d)
	} else if c.until.Load() != 0 {
		// Reloaded to 0: ours would outlive it (net/http's clears were
		// kept back) and fail this write. Cleared once.
		c.until.Store(0)
		_ = c.Conn.SetWriteDeadline(time.Time{})
	}
	n, err := c.Conn.Write(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && c.timedOut.CompareAndSwap(false, true) {
		// Not closed here: the failed write ends the response copy, and
		// its handler's return closes the connection (an early close
		// would cancel the request first and turn the upstream copy's
		// end into a logged read error). That close resets (nginx
		// reset_timedout_connection): the unsent bytes are dropped with
		// the socket at once instead of waiting for a client that does
		// not read.
		c.l.m.WriteTimeouts.Inc()
		if lc, ok := c.Conn.(interface{ SetLinger(int) error }); ok {
			_ = lc.SetLinger(0)
		}
	}
	return n, err
}

// armWrite makes the write deadline between d and d + d/8 from now. It
// moves the deadline only when it is outside that span, and then to
// now + d + d/8: moving it on every write (a timer change each time) cost
// about 1,000 instructions per request (bench/instr.sh), and this way it
// moves at most once per d/8 of a connection's writing. A write that
// blocks is cut after between d and 9/8·d; a reload to a shorter d applies
// at the next write.
func (c *limitConn) armWrite(d time.Duration) {
	now := time.Now()
	at := now.Sub(c.l.epoch)
	ahead := d + d/writeSlack
	if until := time.Duration(c.until.Load()); at+d <= until && until <= at+ahead {
		return
	}
	c.until.Store(int64(at + ahead))
	_ = c.Conn.SetWriteDeadline(now.Add(ahead))
}

// SetWriteDeadline sets another write deadline (a TLS handshake's, a
// hijacker's); the next Write sets write_timeout's again. Clearing it
// (the zero time) while write_timeout is on keeps ours instead: net/http
// clears the write deadline after every request, and the next Write would
// set ours again anyway; on an idle connection it bounds nothing.
func (c *limitConn) SetWriteDeadline(t time.Time) error {
	if t.IsZero() && c.l.writeTimeout.Load() > 0 {
		return nil
	}
	c.until.Store(0)
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline sets both deadlines; the next Write sets write_timeout's
// again.
func (c *limitConn) SetDeadline(t time.Time) error {
	c.until.Store(0)
	return c.Conn.SetDeadline(t)
}

// Close closes the connection and frees its place under the cap (once,
// however often it is called: net/http and ReverseProxy may both close it).
func (c *limitConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.forget(c)
		c.l.open.Add(-1)
		c.l.m.Open.Dec()
	}
	return c.Conn.Close()
}

// SyscallConn returns the socket's raw connection when limitConn wraps a
// socket: the engine writes a response's last bytes and waits for the
// next request in one poller wait (h1.IdleProbe.Exchange). Such a write
// never blocks (a socket that would block takes the rest through Write,
// under write_timeout), so it needs no deadline of limitConn's.
func (c *limitConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// CloseWrite half-closes a TCP connection: net/http does so before closing
// a connection it answered with an error, so the client reads the answer.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// deriveMaxConnections is max_connections' default for an open-file limit
// of nofile: each client connection may hold one upstream connection, so
// half of what remains after a reserve for the store's connections, the
// admin listener, config files and the runtime (512, or a quarter of a
// small limit).
func deriveMaxConnections(nofile uint64) int {
	reserve := min(nofile/4, 512)
	return int(max((nofile-reserve)/2, 1))
}

// streamDeadlines gives HTTP/2 responses (over TLS or h2c) what limitConn
// gives connections: server.write_timeout bounds each write of the
// response. A client that stops reading an HTTP/2 stream stops granting it
// flow-control window, so the handler's write blocks on the stream, not on
// the connection, and limitConn never sees it. The stream's deadline (a
// timer that resets the stream) is armed for the duration of each write
// or flush only: a quiet stream (server-sent events between two events)
// is never cut. One allocation per HTTP/2 request; HTTP/1 pays nothing.
func (l *limitListener) streamDeadlines(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d := time.Duration(l.writeTimeout.Load()); d > 0 && r.ProtoMajor == 2 {
			w = &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineWriter arms the stream's write deadline around each Write and
// flush of an HTTP/2 response.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	n, err := w.ResponseWriter.Write(p)
	_ = w.rc.SetWriteDeadline(time.Time{})
	return n, err
}

// FlushError flushes under the deadline (http.ResponseController.Flush
// finds it; ReverseProxy flushes streamed responses that way).
func (w *deadlineWriter) FlushError() error {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	err := w.rc.Flush()
	_ = w.rc.SetWriteDeadline(time.Time{})
	return err
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
