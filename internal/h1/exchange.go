package h1

import (
	"errors"
	"io"
	"time"
)

// h2Preface is what an HTTP/2 prior-knowledge client sends first (RFC
// 9113 §3.4).
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// maxDiscard is how much of an unread request body the server reads and
// drops to keep the connection (net/http's maxPostHandlerReadBytes).
const maxDiscard = 256 << 10

// readHead reads and parses the next request head. ok is false when the
// connection ends quietly (closed, idle timeout, shutdown, an h2c
// connection handed over); why is a refusal to answer with 400.
func (c *conn) readHead(first bool) (why Reason, ok bool) {
	s := c.srv
	c.rd.unpin()
	// A connection's first head is due within ReadHeaderTimeout of the
	// start, its first byte included (net/http's bound: a client that
	// connects and sends nothing is not given IdleTimeout); a later one
	// within ReadHeaderTimeout of its first byte.
	var due time.Time
	if first && s.ReadHeaderTimeout > 0 {
		due = s.now().Add(s.ReadHeaderTimeout)
	}
	if out := c.w.out; len(out) > 0 {
		c.shrink()
		if !c.waitAfter(out) {
			return OK, false
		}
	} else if len(c.rd.buffered()) == 0 {
		c.shrink()
		if !first && s.ConnIdle != nil {
			s.ConnIdle(c.nc, true)
		}
		if !c.waitFirstByte(due) {
			return OK, false
		}
	} else if !c.setActive() {
		return OK, false
	}
	// A later head's deadline is set before the first read that waits
	// for more of it: most heads come whole with their first byte, and
	// need none.
	armed := first
	if first {
		c.rd.setDeadline(due)
	}
	if first && s.H2 != nil && c.sniffH2() {
		return OK, false
	}
	from, skipped := 0, 0
	for {
		if from == 0 {
			// Empty lines before a request line are dropped, as nginx
			// does (RFC 9112 §2.2: ignore at least one), within the
			// head's bound and its timeout.
			k := leadingCRLF(c.rd.buffered())
			c.rd.consume(k)
			if skipped += k; skipped > s.Limits.head() {
				return HeadTooLarge, false
			}
		}
		n, next, why := scanHead(c.rd.buffered(), from, s.Limits)
		if why != OK {
			return why, false
		}
		if n > 0 {
			why = c.req.parse(c.rd.buffered()[:n])
			c.rd.consumeHead(n)
			return why, why == OK
		}
		from = next
		if !armed && s.ReadHeaderTimeout > 0 {
			c.rd.setDeadline(s.now().Add(s.ReadHeaderTimeout))
		}
		armed = true
		if err := c.rd.fill(); err != nil {
			if err == errFull {
				return HeadTooLarge, false
			}
			return OK, false
		}
	}
}

// leadingCRLF returns the length of the CRLF pairs at the start of b.
func leadingCRLF(b []byte) int {
	n := 0
	for n+1 < len(b) && b[n] == '\r' && b[n+1] == '\n' {
		n += 2
	}
	return n
}

// Above these capacities a connection's buffers are dropped before it
// waits idle: a large head or trailer section once (up to
// server.max_header_bytes, hundreds of thousands of fields) would
// otherwise stay pinned on the idle connection, megabytes each, as nginx
// frees its large_client_header_buffers at keep-alive. Ordinary messages
// (heads up to 16 KiB, responses buffered up to flushAt) stay under them,
// so the steady state allocates nothing; an idle connection keeps at most
// about 100 KiB.
const (
	keepBuf    = 16 << 10    // reader and trailer bytes
	keepOut    = 2 * flushAt // response-writer bytes
	keepFields = 1024        // parsed fields (16 bytes each)
)

// shrink lets go of the buffers a large message grew, the connection
// being idle (nothing buffered, no head pinned).
func (c *conn) shrink() {
	if len(c.rd.buf) > keepBuf {
		c.rd.buf, c.rd.r, c.rd.w = make([]byte, initialBuf), 0, 0
	}
	if cap(c.req.fields) > keepFields {
		c.req.fields = nil
	}
	if cap(c.body.trailer.fields) > keepFields {
		c.body.trailer.fields = nil
	}
	if cap(c.body.tbuf) > keepBuf {
		c.body.tbuf = nil
	}
	if cap(c.w.out) > keepOut {
		c.w.out = nil
	}
}

// waitFirstByte waits, as an idle connection, for the next request's
// first byte until due, or under IdleTimeout when due is zero.
func (c *conn) waitFirstByte(due time.Time) bool {
	c.mu.Lock()
	c.idle = true
	shutting := c.srv.track.shutting.Load()
	// Under c.mu: a Shutdown that wakes the connection sets its
	// deadline after this one, never before.
	if d := c.srv.IdleTimeout; due.IsZero() && d > 0 {
		due = c.srv.now().Add(d)
	}
	c.rd.setDeadline(due)
	c.mu.Unlock()
	if shutting || c.rd.fill() != nil {
		return false
	}
	return c.setActive()
}

// waitAfter sends out, the end of the last response, and waits as an
// idle connection for the next request's first bytes, in one wait on the
// poller (IdleProbe.Exchange): no read is spent finding that the client
// has not sent it yet. The connection becomes idle (nowIdle) only once
// out is sent, so no idle reclaim or shutdown closes it with its response
// unsent; a socket that takes part of out only gets the rest through
// Write, and the wait is then waitFirstByte's.
func (c *conn) waitAfter(out []byte) bool {
	if err := c.rd.setIdle(c.srv.IdleTimeout); err != nil {
		return false
	}
	if err := c.rd.arm(); err != nil {
		return false
	}
	n, sent, _, err := c.sock.Exchange(out, c.rd.buf[c.rd.w:], false, c.idleHook)
	c.w.out = c.w.out[:0]
	switch {
	case err != nil:
		return false
	case n > 0:
		c.rd.w += n
		return c.setActive()
	}
	if _, err := c.w.write(out[sent:]); err != nil {
		return false
	}
	if c.srv.ConnIdle != nil {
		c.srv.ConnIdle(c.nc, true)
	}
	return c.waitFirstByte(time.Time{})
}

// nowIdle makes the connection idle, its response sent (waitAfter): false
// when the server is shutting down, and the connection closes instead of
// waiting.
func (c *conn) nowIdle() bool {
	if c.srv.ConnIdle != nil {
		c.srv.ConnIdle(c.nc, true)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idle = true
	return !c.srv.track.shutting.Load()
}

// setActive leaves the idle state; false when a shutdown woke the
// connection first.
func (c *conn) setActive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idle = false
	return !c.srv.track.shutting.Load()
}

// sniffH2 hands the connection to H2 when it opens with the HTTP/2
// preface, the bytes read so far replayed.
func (c *conn) sniffH2() bool {
	for {
		b := c.rd.buffered()
		n := min(len(b), len(h2Preface))
		if string(b[:n]) != h2Preface[:n] {
			return false
		}
		if n == len(h2Preface) {
			break
		}
		if c.rd.fill() != nil {
			return false
		}
	}
	c.rd.setDeadline(time.Time{})
	replay := append([]byte(nil), c.rd.buffered()...)
	c.rd.consume(len(replay))
	c.w.hijacked = c.srv.H2.push(&replayConn{Conn: c.nc, replay: replay})
	return true
}

// handle serves the parsed request and reports whether the connection
// is kept for the next one.
func (c *conn) handle() bool {
	s, r := c.srv, &c.req
	c.body.reset(c.rd, r.Framing, r.Length, s.Limits.head())
	c.body.cont = &c.w
	r.Body = &c.body
	c.w.reset(r)
	if s.ConnIdle != nil {
		s.ConnIdle(c.nc, false)
	}
	if r.Framing != NoBody {
		// The head's deadline gives way to BodyTimeout between reads.
		c.rd.setIdle(s.BodyTimeout)
	}
	s.Handler.ServeH1(&c.w, r)
	if c.w.hijacked {
		return false
	}
	if c.w.handOver {
		c.handOver()
		return false
	}
	c.w.end()
	if !c.w.closing() && c.body.Done() && len(c.rd.buffered()) == 0 && c.sock.Exchanges() {
		// The response's last bytes go out with the wait for the next
		// request (readHead, waitAfter).
		return true
	}
	if err := c.w.Flush(); err != nil {
		return false
	}
	return !c.w.closing() && c.drain()
}

// drain reads what is left of the request body, up to maxDiscard, so the
// next request starts where it should; false closes the connection.
func (c *conn) drain() bool {
	if c.body.Done() {
		return true
	}
	n, err := io.CopyN(io.Discard, &c.body, maxDiscard)
	return n < maxDiscard && (err == nil || errors.Is(err, io.EOF)) && c.body.Done()
}
