// Package framing guards a plain HTTP/1.x server connection against
// ambiguous request framing, the request-smuggling gadgets RFC 9112 §6.1
// and §11.2 name: a request with both Content-Length and
// Transfer-Encoding, an HTTP/1.0 request with Transfer-Encoding, and
// obs-fold header lines (§5.2). net/http accepts all three — it drops the
// Content-Length, ignores Transfer-Encoding in HTTP/1.0 (so a chunked
// body's bytes are read as the next request) and unfolds obs-fold — and
// keeps no trace of them for a handler to see. nginx answers 400 to each.
//
// A Conn follows the request framing of the bytes it hands to net/http,
// exactly as net/http frames them: each request head is held back until it
// is complete and checked; Content-Length and chunked bodies pass through
// (body bytes straight into the caller's buffer). A head with one of the
// three faults is replaced by a request net/http itself refuses with 400
// Bad Request and closes the connection after ("Content-Length: -1"), so
// nothing after it is ever read as a request. Whatever this parser does
// not follow exactly — an upgrade, CONNECT, the HTTP/2 preface, a
// malformed length or chunk, a head over MaxHead — ends the guarding for
// the rest of the connection (passthrough): net/http then rejects what it
// rejects itself, and the Server's close-after rule still applies. The
// guard cannot see whether a 101 followed an upgrade request, so the proxy
// closes the connection after any upgrade request it answers without
// switching: nothing after one is ever read as a request. HTTP/1.2 to 1.9,
// which net/http serves as HTTP/1.1, are guarded as HTTP/1.1.
package framing

import (
	"bytes"
	"errors"
	"net"
	"os"
)

// MaxHead bounds a held request head (or chunk trailer); a longer one is
// passed through unchecked (net/http's MaxHeaderBytes refuses it).
const MaxHead = 1 << 20

// refused is the head that replaces a faulty one: net/http answers it with
// 400 Bad Request ("bad Content-Length") and closes the connection.
const refused = "GET / HTTP/1.1\r\nHost: refused.invalid\r\nContent-Length: -1\r\n\r\n"

type state uint8

const (
	stHead      state = iota // at a request head
	stBody                   // left Content-Length bytes
	stChunkSize              // at a chunk-size line
	stChunkData              // left chunk-data bytes
	stChunkCRLF              // the CRLF after chunk data
	stTrailer                // trailer lines up to the empty line
	stPass                   // not guarding any more
)

// Conn is a server connection under the guard. Build it with Wrap.
type Conn struct {
	net.Conn
	buf   []byte // buf[off:chk] checked, buf[chk:end] not yet
	off   int
	chk   int
	st    state
	left  int64 // bytes left in stBody and stChunkData
	err   error // a read error kept until the buffered bytes are out
	fault func()

	// Check, when not nil, also judges each complete request head (its
	// bytes, the empty line included); false refuses it as a faulty head
	// is. It lets a stricter parser keep guarding a connection that
	// net/http reads from (the HTTP/1.1 engine's, for the requests after
	// one it handed over).
	Check func(head []byte) bool
}

// Wrap guards c. onFault, when not nil, is called for each faulty head
// replaced (to count it).
func Wrap(c net.Conn, onFault func()) *Conn {
	return &Conn{Conn: c, buf: make([]byte, 0, 4096), fault: onFault}
}

// Read implements net.Conn: checked bytes only.
func (c *Conn) Read(p []byte) (int, error) {
	for {
		if c.chk > c.off {
			n := copy(p, c.buf[c.off:c.chk])
			c.off += n
			return n, nil
		}
		if c.st == stPass && c.off == len(c.buf) {
			if c.err != nil {
				return 0, c.err
			}
			return c.Conn.Read(p)
		}
		if c.chk < len(c.buf) {
			if c.advance() {
				continue
			}
		}
		// Body bytes with nothing buffered go straight to p.
		if (c.st == stBody || c.st == stChunkData) && c.off == len(c.buf) && c.err == nil {
			return c.readBody(p)
		}
		if c.err != nil {
			if c.off < len(c.buf) { // an unfinished head or line at the end: let net/http see it
				c.st, c.chk = stPass, len(c.buf)
				continue
			}
			return 0, c.err
		}
		if err := c.fill(); err != nil {
			if isTimeout(err) {
				// A deadline (net/http aborting its background read):
				// the held bytes stay held.
				return 0, err
			}
			c.err = err
		}
	}
}

// readBody reads body bytes of the current length straight into p.
func (c *Conn) readBody(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	c.left -= int64(n)
	if c.left == 0 {
		c.bodyDone()
	}
	return n, err
}

func (c *Conn) bodyDone() {
	if c.st == stChunkData {
		c.st = stChunkCRLF
	} else {
		c.st = stHead
	}
}

// fill reads more bytes into buf, moving the unread ones to its start.
func (c *Conn) fill() error {
	if c.off > 0 {
		n := copy(c.buf, c.buf[c.off:])
		c.chk -= c.off
		c.buf, c.off = c.buf[:n], 0
	}
	if len(c.buf) == cap(c.buf) {
		if cap(c.buf) >= MaxHead {
			c.st, c.chk = stPass, len(c.buf)
			return nil
		}
		c.buf = append(c.buf, make([]byte, cap(c.buf))...)[:len(c.buf)]
	}
	n, err := c.Conn.Read(c.buf[len(c.buf):cap(c.buf)])
	c.buf = c.buf[:len(c.buf)+n]
	if n > 0 {
		return nil // an error with data comes again on the next read
	}
	return err
}

// advance checks buffered bytes from chk on; it reports whether it made
// progress (more checked bytes, or a state change).
func (c *Conn) advance() bool {
	rest := c.buf[c.chk:]
	switch c.st {
	case stBody, stChunkData:
		n := int64(len(rest))
		if n > c.left {
			n = c.left
		}
		c.chk += int(n)
		c.left -= n
		if c.left == 0 {
			c.bodyDone()
		}
		return true
	case stChunkCRLF:
		if len(rest) < 2 {
			return false
		}
		if rest[0] != '\r' || rest[1] != '\n' {
			c.st, c.chk = stPass, len(c.buf) // net/http refuses it
			return true
		}
		c.chk += 2
		c.st = stChunkSize
		return true
	case stChunkSize:
		return c.chunkSize(rest)
	case stTrailer:
		return c.trailer(rest)
	}
	return c.head(rest)
}

// chunkSize checks one chunk-size line (size, extensions) as net/http's
// chunked reader reads it.
func (c *Conn) chunkSize(rest []byte) bool {
	i := bytes.IndexByte(rest, '\n')
	if i < 0 {
		return false
	}
	line := rest[:i]
	if j := bytes.IndexByte(line, ';'); j >= 0 {
		line = line[:j]
	}
	line = bytes.TrimRight(line, " \t\r")
	size, ok := parseHex(line)
	c.chk += i + 1
	switch {
	case !ok:
		c.st, c.chk = stPass, len(c.buf)
	case size == 0:
		c.st = stTrailer
	default:
		c.st, c.left = stChunkData, size
	}
	return true
}

// trailer checks trailer lines up to the empty one.
func (c *Conn) trailer(rest []byte) bool {
	progress := false
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			return progress
		}
		c.chk += i + 1
		progress = true
		if len(bytes.TrimRight(rest[:i], "\r")) == 0 {
			c.st = stHead
			return true
		}
		rest = rest[i+1:]
	}
}

// isTimeout reports whether err is a deadline's. net/http aborts its
// background read with a deadline in the past on every request, so the
// common case, os.ErrDeadlineExceeded, is tested first without the
// reflection errors.As costs.
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Listener wraps every accepted connection of a plain HTTP/1 listener.
type Listener struct {
	net.Listener
	// OnFault, when not nil, is called for each faulty head replaced.
	OnFault func()
}

// Accept implements net.Listener.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Wrap(c, l.OnFault), nil
}
