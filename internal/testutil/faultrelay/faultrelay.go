// Package faultrelay is a TCP relay for outage tests: clients connect to the
// relay's loopback address and it forwards to a target (a real redis-server),
// while the test switches at run time between passing, delaying, holding
// (blackhole) and resetting the traffic, for existing and new connections.
//
// Each connection owns two goroutines (one per direction) plus the accept
// loop; all of them end, and every connection is closed, at test cleanup.
package faultrelay

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// dialTimeout bounds a connection to the target.
const dialTimeout = 5 * time.Second

// bufSize is the bytes read per chunk and direction.
const bufSize = 32 << 10

type modeKind uint8

const (
	pass modeKind = iota
	delay
	blackhole
	reset
)

// mode is the relay's behaviour; changed is closed when it is replaced, to
// wake every goroutine waiting on it.
type mode struct {
	kind    modeKind
	d       time.Duration
	changed chan struct{}
}

// Stats are cumulative counters of a Relay.
type Stats struct {
	// Accepted is client connections accepted.
	Accepted int64
	// Active is client connections currently open.
	Active int64
	// Resets is client connections closed with a TCP RST (Reset mode).
	Resets int64
	// DialErrors is connections closed because the target could not be dialled.
	DialErrors int64
	// BytesToTarget and BytesFromTarget are bytes forwarded each way.
	BytesToTarget, BytesFromTarget int64
}

// Relay forwards TCP connections from Addr to a target. Its methods are safe
// for use by concurrent goroutines. The zero value is not usable; call Start.
type Relay struct {
	target string
	ln     net.Listener
	// closed is closed by Close to stop every goroutine.
	closed chan struct{}
	wg     sync.WaitGroup

	mu    sync.Mutex
	mode  mode
	conns map[*net.TCPConn]struct{} // client-side connections, for Reset and Close

	accepted, active, resets, dialErrors, toTarget, fromTarget atomic.Int64
}

// Start listens on a free loopback port, forwarding to target ("host:port")
// in Pass mode, and registers Close as cleanup.
func Start(t testing.TB, target string) *Relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faultrelay: listening: %v", err)
	}
	r := &Relay{
		target: target,
		ln:     ln,
		closed: make(chan struct{}),
		mode:   mode{kind: pass, changed: make(chan struct{})},
		conns:  make(map[*net.TCPConn]struct{}),
	}
	r.wg.Add(1)
	go r.acceptLoop()
	t.Cleanup(r.Close)
	return r
}

// Addr is the relay's "127.0.0.1:port", to give clients instead of the target.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Pass forwards everything at once; data held by Blackhole or Delay is
// released (as TCP delivers retransmitted data when a partition heals).
func (r *Relay) Pass() { r.setMode(pass, 0) }

// Delay holds every chunk of data for d before forwarding it, in each
// direction: a request/reply round trip takes at least 2·d longer.
func (r *Relay) Delay(d time.Duration) { r.setMode(delay, d) }

// Blackhole accepts connections but forwards nothing, in either direction,
// until the mode changes: clients see timeouts, not errors (a network
// partition). New connections are accepted but not dialled to the target.
func (r *Relay) Blackhole() { r.setMode(blackhole, 0) }

// Reset closes every client connection with a TCP RST (SO_LINGER 0), and
// every new one right after accept, until the mode changes: clients see
// "connection reset by peer" at once (a crashed or restarted server).
func (r *Relay) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setModeLocked(reset, 0)
	for c := range r.conns {
		r.rst(c)
	}
}

// Stats returns the counters.
func (r *Relay) Stats() Stats {
	return Stats{
		Accepted:        r.accepted.Load(),
		Active:          r.active.Load(),
		Resets:          r.resets.Load(),
		DialErrors:      r.dialErrors.Load(),
		BytesToTarget:   r.toTarget.Load(),
		BytesFromTarget: r.fromTarget.Load(),
	}
}

// Close stops accepting, closes every connection and waits for the relay's
// goroutines to end. Closing twice does nothing.
func (r *Relay) Close() {
	r.mu.Lock()
	select {
	case <-r.closed:
		r.mu.Unlock()
		return
	default:
	}
	close(r.closed)
	r.ln.Close()
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *Relay) setMode(k modeKind, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setModeLocked(k, d)
}

// setModeLocked replaces the mode and wakes its waiters; r.mu must be held.
func (r *Relay) setModeLocked(k modeKind, d time.Duration) {
	close(r.mode.changed)
	r.mode = mode{kind: k, d: d, changed: make(chan struct{})}
}

func (r *Relay) currentMode() mode {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mode
}

// rst closes c with an RST; r.mu must be held. Its goroutines see the error
// and end.
func (r *Relay) rst(c *net.TCPConn) {
	c.SetLinger(0)
	c.Close()
	r.resets.Add(1)
}

func (r *Relay) acceptLoop() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a transient accept error (EMFILE...)
		}
		r.accepted.Add(1)
		tc := c.(*net.TCPConn)
		r.mu.Lock()
		select {
		case <-r.closed:
			r.mu.Unlock()
			tc.Close()
			return
		default:
		}
		r.conns[tc] = struct{}{}
		r.active.Add(1)
		if r.mode.kind == reset {
			r.rst(tc)
		}
		r.wg.Add(1)
		r.mu.Unlock()
		go r.serve(tc)
	}
}

// serve dials the target once the mode lets data through, then copies the
// target's replies on this goroutine while a second one copies requests.
func (r *Relay) serve(client *net.TCPConn) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		delete(r.conns, client)
		r.mu.Unlock()
		client.Close()
		r.active.Add(-1)
	}()
	// Hold a new connection while blackholed (Reset and Close end it).
	if !r.wait(0) {
		return
	}
	target, err := net.DialTimeout("tcp", r.target, dialTimeout)
	if err != nil {
		r.dialErrors.Add(1)
		return
	}
	defer target.Close()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.copy(target, client, &r.toTarget)
		// The client side ended: end the reply direction too.
		target.Close()
	}()
	r.copy(client, target, &r.fromTarget)
	client.Close()
}

// copy forwards src to dst chunk by chunk, each chunk once the mode lets it
// through, until either side fails or the relay closes.
func (r *Relay) copy(dst io.Writer, src io.Reader, n *atomic.Int64) {
	buf := make([]byte, bufSize)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			if !r.wait(time.Now().UnixNano()) {
				return
			}
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return
			}
			n.Add(int64(k))
		}
		if err != nil {
			return
		}
	}
}

// wait blocks until data read at readAt (Unix ns; 0 for no data) may be
// forwarded: at once in Pass, readAt + d in Delay, never in Blackhole (until
// the mode changes). It reports false in Reset mode and after Close.
func (r *Relay) wait(readAt int64) bool {
	for {
		m := r.currentMode()
		var timer *time.Timer
		var fire <-chan time.Time // nil (never) unless delaying
		switch m.kind {
		case pass:
			return true
		case reset:
			return false
		case delay:
			left := time.Duration(readAt - time.Now().UnixNano() + int64(m.d))
			if readAt == 0 || left <= 0 {
				return true
			}
			timer = time.NewTimer(left)
			fire = timer.C
		}
		select {
		case <-fire:
			return true
		case <-m.changed:
		case <-r.closed:
		}
		if timer != nil {
			timer.Stop()
		}
		select {
		case <-r.closed:
			return false
		default:
		}
	}
}
