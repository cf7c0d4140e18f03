package h1

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// tracker counts a Server's connections for a graceful shutdown: idle
// ones are woken and closed at once, busy ones close after their
// response, hijacked ones (tunnels) run until they end or the shutdown's
// context does.
type tracker struct {
	shutting atomic.Bool
	mu       sync.Mutex
	conns    map[*conn]struct{}
	tunnels  map[*tunnel]struct{}
	idle     chan struct{} // closed when shutting and nothing is left
}

func (t *tracker) add(c *conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shutting.Load() {
		return false
	}
	if t.conns == nil {
		t.conns = make(map[*conn]struct{})
		t.tunnels = make(map[*tunnel]struct{})
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *tracker) remove(c *conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.checkDone()
	t.mu.Unlock()
}

// checkDone signals Shutdown when nothing is left; t.mu held.
func (t *tracker) checkDone() {
	if t.shutting.Load() && len(t.conns) == 0 && len(t.tunnels) == 0 && t.idle != nil {
		close(t.idle)
		t.idle = nil
	}
}

// hijack moves c from the served connections to the tunnels.
func (t *tracker) hijack(c *conn) net.Conn {
	tn := &tunnel{Conn: c.nc, t: t}
	t.mu.Lock()
	t.tunnels[tn] = struct{}{}
	t.mu.Unlock()
	return tn
}

// tunnel is a hijacked connection, counted until closed.
type tunnel struct {
	net.Conn
	t    *tracker
	once sync.Once
}

// Close closes the connection and stops counting it.
func (tn *tunnel) Close() error {
	err := tn.Conn.Close()
	tn.once.Do(func() {
		tn.t.mu.Lock()
		delete(tn.t.tunnels, tn)
		tn.t.checkDone()
		tn.t.mu.Unlock()
	})
	return err
}

// aLongTimeAgo is a deadline in the past, to wake a blocked read.
var aLongTimeAgo = time.Unix(1, 0)

// Shutdown stops the server gracefully: new connections are refused,
// idle ones closed, busy ones closed after their response ("Connection:
// close" on it), and hijacked tunnels left to end. It returns when none
// is left, or closes every remaining connection and tunnel when ctx ends
// first and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	t := &s.track
	t.mu.Lock()
	t.shutting.Store(true)
	done := make(chan struct{})
	t.idle = done
	for c := range t.conns {
		c.mu.Lock()
		if c.idle {
			c.nc.SetReadDeadline(aLongTimeAgo)
		}
		c.mu.Unlock()
	}
	t.checkDone()
	t.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	for c := range t.conns {
		c.nc.Close()
	}
	for tn := range t.tunnels {
		tn.Conn.Close()
	}
	t.mu.Unlock()
	return ctx.Err()
}

// Listener is a net.Listener fed by a Server with the connections it
// gives to net/http: those that speak HTTP/2 (Server.H2) and those handed
// over (Server.Fallback), for net/http's Serve. Build it with
// NewListener.
type Listener struct {
	addr   net.Addr
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

// NewListener returns a Listener reporting addr as its address.
func NewListener(addr net.Addr) *Listener {
	return &Listener{addr: addr, ch: make(chan net.Conn), closed: make(chan struct{})}
}

// push hands c to Accept; false once the listener is closed.
func (l *Listener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.closed:
		return false
	}
}

// Accept returns the next connection, or net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close stops Accept; connections not yet accepted are refused.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr returns the address given to NewListener.
func (l *Listener) Addr() net.Addr { return l.addr }

// replayConn replays the bytes a sniff or a handed-over request read
// before the connection's own; tls is the connection's TLS state (nil in
// cleartext), which the wrapper hides from net/http (see TLSState).
type replayConn struct {
	net.Conn
	replay []byte
	tls    *tls.ConnectionState
}

// Read returns the replayed bytes first.
func (r *replayConn) Read(p []byte) (int, error) {
	if len(r.replay) > 0 {
		n := copy(p, r.replay)
		r.replay = r.replay[n:]
		return n, nil
	}
	return r.Conn.Read(p)
}
