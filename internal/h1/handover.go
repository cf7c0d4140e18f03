package h1

import (
	"crypto/tls"
	"errors"
	"net"
	"time"
)

// Errors of HandOver: the request has started where the engine cannot
// give it back (a head or 1xx written, its body read), or the Server has
// no Fallback listener.
var (
	ErrBodyRead   = errors.New("h1: request body already read")
	ErrNoFallback = errors.New("h1: no fallback listener")
)

// HandOver gives this request and the rest of its connection to
// Server.Fallback (a net/http server): when the handler returns, the
// connection is delivered there with the request's head and every byte
// read after it (a body, pipelined requests) replayed before the
// connection's own, so net/http reads the request as the client sent
// it. Every response before this one is complete (the engine answers in
// order). It must be called before anything is written for the request
// (ErrHeadWritten: a final head, a 100 Continue or a 1xx) and before its
// body is read (ErrBodyRead); the handler then writes nothing and
// returns.
func (w *ResponseWriter) HandOver() error {
	switch {
	case w.c.srv.Fallback == nil:
		return ErrNoFallback
	case w.wroteHead || w.continued || w.informed:
		return ErrHeadWritten
	case w.c.body.started():
		return ErrBodyRead
	}
	w.handOver = true
	return nil
}

// started reports whether Read has taken anything of the body: the first
// Read of a body drops cont (the pending 100 Continue) before reading; a
// Read of an empty body takes nothing and keeps it.
func (b *Body) started() bool { return b.cont == nil }

// handOver delivers the connection to Fallback, the request's head and
// the bytes read after it replayed; the connection is no longer the
// loop's (closed here when Fallback is closed).
func (c *conn) handOver() {
	rest := c.rd.buffered()
	replay := make([]byte, 0, len(c.req.buf)+len(rest))
	replay = append(append(replay, c.req.buf...), rest...)
	c.rd.consume(len(rest))
	c.nc.SetDeadline(time.Time{})
	c.w.hijacked = true
	if !c.srv.Fallback.push(&replayConn{Conn: c.nc, replay: replay, tls: c.req.TLS}) {
		c.nc.Close()
	}
}

// TLSState returns the TLS state of a connection the Server delivered on
// Fallback or H2 after a replay: net/http sets Request.TLS only for a
// *tls.Conn, which the replaying wrapper hides, so a fallback server's
// ConnContext keeps this for its handlers. Nil for a cleartext or any
// other connection.
func TLSState(c net.Conn) *tls.ConnectionState {
	if rc, ok := c.(*replayConn); ok {
		return rc.tls
	}
	return nil
}

// SetBodyTimeout sets the longest pause between two reads of this
// request's body (0: none) in place of Server.BodyTimeout, whose value is
// fixed while serving: a reloaded server.body_timeout, or a stream's own
// bound.
func (w *ResponseWriter) SetBodyTimeout(d time.Duration) {
	if w.req.Framing != NoBody {
		w.c.rd.setIdle(d)
	}
}

// NetConn returns the connection under the replayed bytes (as
// tls.Conn.NetConn), for a listener that finds its own wrapper below.
func (r *replayConn) NetConn() net.Conn { return r.Conn }
