package server

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"sync"

	"github.com/pires/go-proxyproto"

	"rlproxy/internal/framing"
)

// Which connection gives way at server.max_connections, and how many one
// client may hold (server.max_connections_per_client).
//
// At the cap a new connection is admitted by closing an open one that is
// doing nothing, as nginx closes its "reusable connections" when it runs
// out: first the one idle longest in keep-alive between requests (HTTP/2:
// with no stream open), then the one that has waited longest without
// sending a complete request head (HTTP/2: its connection preface). Only
// when every open connection has a request in progress (or is upgraded) is
// the new one refused. The phases come from net/http's Server.ConnState
// hook (trackState); each phase's connections sit in a list ordered by when
// they entered it, so the oldest is its head: admitting, moving and
// closing are O(1) under one mutex, held for a few pointer moves.
//
// The per-client cap is HAProxy's `tcp-request connection reject if {
// src_conn_cur ge N }`: a client's open connections, idle ones included,
// each HTTP/2 connection one, whatever it carries. The client is the TCP
// peer or, with server.proxy_protocol, the address its header names (read
// in the connection's goroutine, so a slow header holds no accept);
// X-Forwarded-For arrives only with a request, after the connection was
// admitted, and is not used. IPv6 clients are counted by /64: one host
// commonly holds a whole /64 and picks new addresses from it at will. A
// peer in real_ip.trusted_proxies is not capped: it carries many clients.

// connPhase is what a tracked connection is doing.
type connPhase uint8

const (
	phaseBusy      connPhase = iota // not listed: a request in progress, upgraded, closed, or not yet accepted
	phaseNoRequest                  // accepted, no complete request head yet
	phaseIdle                       // keep-alive between requests
)

// connList is a doubly linked list of connections through their prev and
// next fields, oldest first. Its users hold limitListener.mu.
type connList struct{ head, tail *limitConn }

func (q *connList) push(c *limitConn) {
	c.prev, c.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = c
	} else {
		q.head = c
	}
	q.tail = c
}

func (q *connList) remove(c *limitConn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		q.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		q.tail = c.prev
	}
	c.prev, c.next = nil, nil
}

// list is the list of connections in phase p; nil for phaseBusy.
func (l *limitListener) list(p connPhase) *connList {
	switch p {
	case phaseNoRequest:
		return &l.noRequest
	case phaseIdle:
		return &l.idle
	}
	return nil
}

// move puts c in phase p (at the tail of its list). Under l.mu. A closed
// connection stays busy: a late hook must not list it again.
func (l *limitListener) move(c *limitConn, p connPhase) {
	if c.gone {
		return
	}
	if q := l.list(c.phase); q != nil {
		q.remove(c)
	}
	c.phase = p
	if q := l.list(p); q != nil {
		q.push(c)
	}
}

// trackState is the public http.Server's ConnState hook: it moves the
// connection between the phases reclaim chooses from.
func (l *limitListener) trackState(nc net.Conn, s http.ConnState) {
	var p connPhase
	switch s {
	case http.StateIdle:
		p = phaseIdle
	case http.StateActive, http.StateHijacked, http.StateClosed:
		p = phaseBusy
	default: // StateNew: listed as phaseNoRequest at accept
		return
	}
	c := findLimitConn(nc)
	if c == nil {
		return
	}
	l.mu.Lock()
	l.move(c, p)
	l.mu.Unlock()
}

// engineState is the engine's ConnIdle hook (h1.Server): trackState for
// the connections it serves.
func (l *limitListener) engineState(nc net.Conn, idle bool) {
	s := http.StateActive
	if idle {
		s = http.StateIdle
	}
	l.trackState(nc, s)
}

// findLimitConn finds the limitConn under the wrappers of the public
// listener (TLS, the request-head guard, PROXY protocol, admitConn, the
// engine's replay of a handed-over connection); nil
// for a connection of another listener.
func findLimitConn(nc net.Conn) *limitConn {
	for {
		switch c := nc.(type) {
		case *limitConn:
			return c
		case *tls.Conn:
			nc = c.NetConn()
		case *framing.Conn:
			nc = c.Conn
		case *proxyproto.Conn:
			nc = c.Raw()
		case *admitConn:
			nc = c.Conn
		case interface{ NetConn() net.Conn }: // the engine's hand-over (h1.Server.Fallback)
			nc = c.NetConn()
		default:
			return nil
		}
	}
}

// reclaim closes the oldest idle connection, else the oldest without a
// complete request head, to make room for a new one; false when every
// open connection is busy.
func (l *limitListener) reclaim() bool {
	l.mu.Lock()
	c := l.idle.head
	if c == nil {
		c = l.noRequest.head
	}
	if c == nil {
		l.mu.Unlock()
		return false
	}
	if c.phase == phaseIdle {
		l.m.ReclaimedIdle.Inc()
	} else {
		l.m.ReclaimedNoRequest.Inc()
	}
	l.move(c, phaseBusy)
	c.gone = true // a hook racing the close must not list it again
	l.mu.Unlock()
	// A plain close, as nginx's: a keep-alive client reads the end of
	// the connection and retries elsewhere.
	_ = c.Close()
	return true
}

// clientKey is the address a connection is counted under: the IP of a
// TCP address, IPv4-mapped IPv6 as IPv4, IPv6 masked to its /64.
func clientKey(a net.Addr) (netip.Addr, bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return netip.Addr{}, false
	}
	ip = ip.Unmap()
	if ip.Is6() {
		ip = netip.PrefixFrom(ip, 64).Masked().Addr()
	}
	return ip, true
}

// derivePerClient is max_connections_per_client's default for a
// max_connections of limit: an eighth, so no fewer than eight addresses
// can fill the listener, but at least 64 (a NATed office of browsers
// opening six connections per host) unless that is over half of a small
// limit; never below 1.
func derivePerClient(limit int) int {
	return max(limit/8, min(limit/2, 64), 1)
}

// admit counts c under its client's address (from addr) and reports
// whether the client was within the per-client cap; a refused connection
// is not counted. Every connection is counted, whatever the cap, so a
// reload that sets one applies to the connections already open.
func (l *limitListener) admit(c *limitConn, addr net.Addr) bool {
	key, ok := clientKey(addr)
	if !ok {
		return true
	}
	limit := l.perClient.Load()
	capped := limit > 0 && !l.trustedPeer(key)
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.clients[key]
	if capped && int64(n) >= limit {
		return false
	}
	l.clients[key] = n + 1
	c.client, c.counted = key, true
	return true
}

// trustedPeer reports whether ip is in real_ip.trusted_proxies.
func (l *limitListener) trustedPeer(ip netip.Addr) bool {
	if p := l.trusted.Load(); p != nil {
		for _, pre := range *p {
			if pre.Contains(ip) {
				return true
			}
		}
	}
	return false
}

// forget takes c out of the phase lists and its client's count, once:
// Close calls it.
func (l *limitListener) forget(c *limitConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.move(c, phaseBusy)
	c.gone = true
	if !c.counted {
		return
	}
	c.counted = false
	if n := l.clients[c.client] - 1; n > 0 {
		l.clients[c.client] = n
	} else {
		delete(l.clients, c.client)
	}
}

// refuseClient closes c, a connection over the per-client cap, with a
// reset, and counts it.
func (l *limitListener) refuseClient(c net.Conn) {
	raw := c
	if lc := findLimitConn(c); lc != nil {
		raw = lc.Conn
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	l.m.ClientRefused.Inc() // before the close: a client seeing the reset sees the count
	l.clientLog.note(l.log, "server.max_connections_per_client reached: closing a client's new connections",
		"max_connections_per_client", l.perClient.Load())
	_ = c.Close()
}

// admitAfterProxy wraps ln, the PROXY protocol listener, so that the
// per-client cap counts the address of each connection's PROXY header
// (admitConn); without PROXY protocol Accept counts the TCP peer itself.
func (l *limitListener) admitAfterProxy(ln net.Listener) net.Listener {
	if !l.deferAdmit {
		return ln
	}
	return &admitListener{Listener: ln, l: l}
}

// admitListener is admitAfterProxy's listener.
type admitListener struct {
	net.Listener
	l *limitListener
}

// Accept implements net.Listener.
func (a *admitListener) Accept() (net.Conn, error) {
	c, err := a.Listener.Accept()
	if err != nil {
		return nil, err
	}
	lc := findLimitConn(c)
	if lc == nil {
		return c, nil
	}
	return &admitConn{Conn: c, lc: lc, l: a.l}, nil
}

// errClientCap is the read error of a connection over the per-client cap.
var errClientCap = errors.New("server.max_connections_per_client reached")

// admitConn applies the per-client cap at its first read, in the
// connection's goroutine: RemoteAddr then reads the PROXY header (bounded
// by proxyHeaderTimeout).
type admitConn struct {
	net.Conn
	lc   *limitConn
	l    *limitListener
	once sync.Once
	err  error
}

// Read implements net.Conn.
func (c *admitConn) Read(p []byte) (int, error) {
	c.once.Do(func() {
		if !c.l.admit(c.lc, c.Conn.RemoteAddr()) {
			c.err = errClientCap
			c.l.refuseClient(c.Conn)
		}
	})
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Read(p)
}
