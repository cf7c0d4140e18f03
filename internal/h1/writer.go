package h1

import (
	"errors"
	"net"
	"time"
)

// flushAt is the pending output, in bytes, past which a write goes to
// the connection.
const flushAt = 16 << 10

// ResponseWriter writes one response to the client: at most one 100
// Continue and any 1xx heads, then one final head and its body, framed
// as WriteHead was told. It is reused for each request on a connection.
type ResponseWriter struct {
	c       *conn
	req     *Request
	out     []byte // pending output
	framing Framing
	left    int64 // Length framing: body bytes still due
	until   time.Time

	wroteHead, continued, hijacked, closeAfter bool
	informed, handOver                         bool // a 1xx sent; HandOver called
	abandoned                                  bool // Abandon: nothing more goes out
}

// ErrHeadWritten is returned by WriteHead, Continue and Informational
// once the final head is written; ErrBodyLength by Write beyond the
// announced Content-Length.
var (
	ErrHeadWritten = errors.New("h1: response head already written")
	ErrBodyLength  = errors.New("h1: body longer than its Content-Length")
	ErrNoHead      = errors.New("h1: body written before the head")
)

func (w *ResponseWriter) reset(r *Request) {
	*w = ResponseWriter{c: w.c, req: r, out: w.out[:0], until: w.until}
}

// Closing reports whether the connection closes after this response, so
// the head should say "Connection: close": the client asked for it, the
// server is shutting down, or the client waits for a 100 Continue that
// will not come (RFC 9110 §10.1.1: its body may or may not follow).
func (w *ResponseWriter) Closing() bool { return w.closing() }

func (w *ResponseWriter) closing() bool {
	return w.closeAfter || w.req.Close() || w.c.srv.track.shutting.Load() ||
		w.req.expect100 && !w.continued && !w.req.Body.Done()
}

// Gone reports whether the client has closed or reset its connection
// (h1.ClientWatch), by a look at the socket that takes nothing: a client
// that sent more (a pipelined request) or nothing yet is still there, as
// nginx's check of a broken connection reads it. A connection that is not
// a plain socket (TLS) is never seen gone.
func (w *ResponseWriter) Gone() bool { return w.c.sock.Gone() }

// CloseAfter makes the connection close after this response.
func (w *ResponseWriter) CloseAfter() { w.closeAfter = true }

// Abandon ends the response where it is and closes the connection: no
// answer (not the 500 a handler that wrote nothing gets) and nothing still
// buffered goes out, for a client that has gone (nginx's 499: it closes
// without answering).
func (w *ResponseWriter) Abandon() { w.closeAfter, w.abandoned = true, true }

// Scratch returns an empty slice with room to build a head in (reused
// for each response).
func (w *ResponseWriter) Scratch() []byte { return w.c.scratch[:0] }

// Continue sends "100 Continue" to a client that waits for it (RFC 9110
// §10.1.1); the handler calls it once it accepts the body (reading the
// body sends it too). It does nothing when no 100 is due.
func (w *ResponseWriter) Continue() error {
	if w.wroteHead {
		return ErrHeadWritten
	}
	return w.autoContinue()
}

func (w *ResponseWriter) autoContinue() error {
	if !w.req.expect100 || w.continued || w.wroteHead {
		return nil
	}
	w.continued = true
	w.out = append(w.out, "HTTP/1.1 100 Continue\r\n\r\n"...)
	return w.Flush()
}

// Informational sends a 1xx head (103 Early Hints, forwarded from the
// upstream) before the final one; head ends with the empty line. An
// HTTP/1.0 client gets none (RFC 9110 §15.2).
func (w *ResponseWriter) Informational(head []byte) error {
	if w.wroteHead {
		return ErrHeadWritten
	}
	if w.req.minor == 0 {
		return nil
	}
	w.informed = true
	w.out = append(w.out, head...)
	return w.Flush()
}

// WriteHead queues the final head (status line to empty line, built with
// AppendResponse or AppendStatusLine and AppendField) and the framing of
// the body Write will be given: Length with its byte count, Chunked
// (each Write becomes a chunk, trailers follow at the end), ToClose (the
// connection closes after the body), or NoBody. The head must match
// (Content-Length, Transfer-Encoding, Connection: close); Chunked to an
// HTTP/1.0 client is sent as ToClose, and an HTTP/1.0 client that keeps
// the connection is told so ("Connection: keep-alive" is added).
func (w *ResponseWriter) WriteHead(head []byte, f Framing, length int64) error {
	if w.wroteHead {
		return ErrHeadWritten
	}
	if f == Chunked && w.req.minor == 0 {
		// An HTTP/1.0 client knows no chunked coding (RFC 9112 §7):
		// the body goes as it is up to the close (the head must carry
		// no Transfer-Encoding: AppendResponse's dropChunked).
		f = ToClose
	}
	w.wroteHead, w.framing, w.left = true, f, length
	if f == ToClose {
		w.closeAfter = true
	}
	if w.req.minor == 0 && !w.closing() && len(head) >= 4 {
		// An HTTP/1.0 client keeps the connection only when told
		// (RFC 9112 §9.3, "keep-alive" from RFC 2068).
		w.out = append(w.out, head[:len(head)-2]...)
		w.out = append(w.out, "Connection: keep-alive\r\n\r\n"...)
		return nil
	}
	w.out = append(w.out, head...)
	return nil
}

// Write writes body bytes, chunk-framed when the head said Chunked. A
// response to HEAD, or a NoBody one, drops them.
func (w *ResponseWriter) Write(p []byte) (int, error) {
	if !w.wroteHead {
		return 0, ErrNoHead
	}
	switch w.framing {
	case NoBody:
		return len(p), nil
	case Length:
		if int64(len(p)) > w.left {
			return 0, ErrBodyLength
		}
		w.left -= int64(len(p))
	case Chunked:
		if len(p) == 0 {
			return 0, nil
		}
		w.out = append(appendHex(w.out, len(p)), '\r', '\n')
		n, err := w.raw(p)
		w.out = append(w.out, '\r', '\n')
		return n, err
	}
	return w.raw(p)
}

// raw queues p, or sends the pending output and p when they exceed
// flushAt.
func (w *ResponseWriter) raw(p []byte) (int, error) {
	if len(w.out)+len(p) <= flushAt {
		w.out = append(w.out, p...)
		return len(p), nil
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	return w.write(p)
}

// Flush sends the pending output: after each event of a stream (SSE),
// and at the end of the response.
func (w *ResponseWriter) Flush() error {
	if len(w.out) == 0 {
		return nil
	}
	_, err := w.write(w.out)
	w.out = w.out[:0]
	return err
}

// write writes p with the write deadline at least WriteTimeout away
// (moved to 9/8 of it only when less is left).
func (w *ResponseWriter) write(p []byte) (int, error) {
	if d := w.c.srv.WriteTimeout; d > 0 {
		now := w.c.srv.now()
		if w.until.Sub(now) < d {
			w.until = now.Add(d + d/8)
			w.c.nc.SetWriteDeadline(w.until)
		}
	}
	return w.c.nc.Write(p)
}

// Trailer ends a Chunked body with the last chunk and fields as trailer
// fields (RFC 9112 §7.1.2); without a call the body ends with none.
func (w *ResponseWriter) Trailer(h *Header) error {
	if w.framing != Chunked {
		return nil
	}
	w.framing = NoBody
	w.out = append(w.out, "0\r\n"...)
	w.out = appendTrailer(w.out, h)
	w.out = append(w.out, "\r\n"...)
	return nil
}

// end completes the response after the handler, in the output buffer: a
// 500 when it wrote no head (none at all after Abandon), the last chunk.
// The caller flushes it, or sends it with the next wait (conn.waitAfter).
func (w *ResponseWriter) end() {
	if w.abandoned {
		w.out = w.out[:0]
		return
	}
	if !w.wroteHead {
		w.closeAfter = true
		w.WriteHead([]byte("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"), NoBody, 0)
	}
	if w.framing == Chunked {
		w.Trailer(&Header{})
	}
	if w.framing == Length && w.left > 0 {
		w.closeAfter = true
	}
}

// Hijack hands the connection over after the head written (a 101 to an
// allowed Upgrade): it flushes, and returns the connection and the
// client's bytes already read past the request. The server still counts
// the connection for a shutdown until the returned Conn is closed.
func (w *ResponseWriter) Hijack() (net.Conn, []byte, error) {
	if err := w.Flush(); err != nil {
		return nil, nil, err
	}
	w.hijacked = true
	c := w.c
	rest := append([]byte(nil), c.rd.buffered()...)
	c.rd.consume(len(rest))
	c.rd.setDeadline(time.Time{})
	c.nc.SetWriteDeadline(time.Time{})
	return c.srv.track.hijack(c), rest, nil
}
