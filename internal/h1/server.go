package h1

import (
	"crypto/tls"
	"io"
	"net"
	"net/netip"
	"runtime/debug"
	"sync"
	"time"
)

// Handler serves one request on a connection. It reads the body from
// r.Body, answers through w (WriteHead, Write, Flush) and returns when
// the response is complete; or it takes the connection over with
// w.Hijack. The strings of r are valid until it returns.
type Handler interface {
	ServeH1(w *ResponseWriter, r *Request)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(w *ResponseWriter, r *Request)

// ServeH1 calls f(w, r).
func (f HandlerFunc) ServeH1(w *ResponseWriter, r *Request) { f(w, r) }

// Server serves HTTP/1.1 on connections handed to ServeConn, one
// goroutine per connection (the caller's). The zero value of a duration
// disables that timeout. Fields must not change once serving starts.
type Server struct {
	Handler Handler
	Limits  Limits

	// IdleTimeout bounds the wait for a request's first byte on a kept
	// connection (server.idle_timeout); ReadHeaderTimeout the time from
	// that byte to the end of the head (server.read_header_timeout);
	// BodyTimeout the pause between two reads of a request body
	// (server.body_timeout); WriteTimeout how long one write to the
	// client may block (server.write_timeout); HandshakeTimeout a TLS
	// handshake.
	IdleTimeout, ReadHeaderTimeout, BodyTimeout, WriteTimeout time.Duration
	HandshakeTimeout                                          time.Duration

	// H2, when set, receives the connections that speak HTTP/2: TLS
	// connections that negotiated ALPN "h2", and cleartext ones that
	// open with the HTTP/2 preface (h2c prior knowledge, the preface
	// replayed). Serve it with net/http (http2 configured). Nil refuses
	// them: a TLS "h2" connection is closed, a preface is a 400.
	H2 *Listener

	// Fallback, when set, receives the connections whose handler called
	// ResponseWriter.HandOver: the request's head and every byte read
	// after it are replayed before the connection's own, for a net/http
	// server to Serve for the rest of the connection. A handed-over
	// connection is no longer the Server's: Shutdown does not count it
	// (the net/http server's Shutdown does).
	Fallback *Listener

	// Refused, when set, returns the whole response written to a
	// request head refused with why (its 400, with a body and
	// "Connection: close"); nil writes a plain 400. It may count the
	// reason.
	Refused func(why Reason, peer netip.AddrPort) []byte

	// ConnIdle, when set, is told when a connection starts waiting for
	// its next request after a response (idle true) and when a request
	// head has been read (idle false): net/http's StateIdle and
	// StateActive, for a listener that closes idle connections first at
	// its cap. A new connection is neither until its first head.
	ConnIdle func(nc net.Conn, idle bool)

	// Panicked, when set, is told of a handler's panic (its value and
	// stack). The panic is recovered either way, as net/http does: the
	// connection is closed and the server goes on.
	Panicked func(v any, stack []byte)

	// Now is the clock for deadlines; nil means time.Now.
	Now func() time.Time

	track tracker
}

func (s *Server) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

// plain400 is the default answer to a refused head.
const plain400 = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n" +
	"Content-Length: 12\r\nConnection: close\r\n\r\nBad Request\n"

// conn is one client connection's state, reused for each request.
type conn struct {
	srv      *Server
	nc       net.Conn
	rd       *reader
	req      Request
	body     Body
	w        ResponseWriter
	mu       sync.Mutex // guards idle against Shutdown's wake-up
	idle     bool
	scratch  []byte      // Scratch's storage
	refused  bool        // a head was refused: linger before the close
	sock     IdleProbe   // the socket, for waitAfter
	idleHook func() bool // c.nowIdle, made once: a method value per call would allocate
}

// ServeConn serves nc until the client or the server ends it, then
// closes nc (unless a handler hijacked it). A *tls.Conn is handshaken
// here, under HandshakeTimeout (its tls.Config holds the certificate
// hooks: GetCertificate, acme-tls/1, client certificates), handed to H2
// when it negotiated "h2", and closed after the handshake when it
// negotiated "acme-tls/1".
func (s *Server) ServeConn(nc net.Conn) {
	if tc, ok := nc.(*tls.Conn); ok && !s.handshake(tc) {
		return
	}
	c := &conn{srv: s, nc: nc, rd: newReader(nc, s.Limits.head(), s.now), scratch: make([]byte, 0, 4<<10)}
	c.w.c = c
	c.sock.Init(nc)
	c.idleHook = c.nowIdle
	c.body.reset(c.rd, NoBody, 0, 0)
	c.req.Peer = peerOf(nc)
	if tc, ok := nc.(*tls.Conn); ok {
		st := tc.ConnectionState()
		c.req.TLS = &st
	}
	if !s.track.add(c) {
		nc.Close()
		return
	}
	hijacked := c.serve()
	s.track.remove(c)
	if !hijacked {
		if c.refused || !c.body.Done() || len(c.rd.buffered()) > 0 {
			c.linger()
		}
		nc.Close()
	}
}

// handshake runs the TLS handshake under HandshakeTimeout; an "h2"
// connection goes to H2 (false: ServeConn is done with it).
func (s *Server) handshake(tc *tls.Conn) bool {
	if s.HandshakeTimeout > 0 {
		tc.SetDeadline(s.now().Add(s.HandshakeTimeout))
	}
	if err := tc.Handshake(); err != nil {
		tc.Close()
		return false
	}
	tc.SetDeadline(time.Time{})
	switch tc.ConnectionState().NegotiatedProtocol {
	case "acme-tls/1":
		// A TLS-ALPN-01 challenge (RFC 8737) ends with the handshake:
		// the certificate answered it.
		tc.Close()
		return false
	case "h2":
	default:
		return true
	}
	if s.H2 == nil || !s.H2.push(tc) {
		tc.Close()
	}
	return false
}

func peerOf(nc net.Conn) netip.AddrPort {
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort()
	}
	return netip.AddrPort{}
}

// serve runs the request loop; it reports whether the connection was
// hijacked (and is no longer the loop's to close).
func (c *conn) serve() (hijacked bool) {
	defer func() {
		if v := recover(); v != nil {
			if c.srv.Panicked != nil {
				c.srv.Panicked(v, debug.Stack())
			}
			hijacked = c.w.hijacked
		}
	}()
	first := true
	for {
		why, ok := c.readHead(first)
		if why != OK {
			c.refuse(why)
			return false
		}
		if !ok {
			return c.w.hijacked // true: handed to H2
		}
		first = false
		keep := c.handle()
		if c.w.hijacked { // a tunnel, or handed to Fallback
			return true
		}
		if !keep {
			return false
		}
	}
}

// refuse answers a refused head; the connection ends after it, lingering
// (ServeConn): nothing the client sent after the head is parsed.
func (c *conn) refuse(why Reason) {
	out := []byte(plain400)
	if c.srv.Refused != nil {
		out = c.srv.Refused(why, c.req.Peer)
	}
	c.setWriteDeadline()
	c.nc.Write(out)
	c.refused = true
}

// linger is nginx's lingering close, before closing a connection the
// client may still be sending on (a refused head, an unread body): a
// close with unread bytes resets the connection, which may destroy the
// answer before the client reads it, so what comes is read and dropped
// for a short while. None of it is parsed.
func (c *conn) linger() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		c.nc.SetReadDeadline(c.srv.now().Add(lingerTime))
		io.CopyN(io.Discard, c.nc, lingerBytes)
	}
}

// lingerTime and lingerBytes bound a lingering close.
const (
	lingerTime  = 2 * time.Second
	lingerBytes = 64 << 10
)

func (c *conn) setWriteDeadline() {
	if d := c.srv.WriteTimeout; d > 0 {
		c.nc.SetWriteDeadline(c.srv.now().Add(d))
	}
}
