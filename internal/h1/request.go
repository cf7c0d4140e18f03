package h1

import (
	"crypto/tls"
	"net/netip"
)

// Framing is how a message's body is delimited (RFC 9112 §6.3).
type Framing uint8

// Body framings.
const (
	NoBody  Framing = iota // no body: no Content-Length or Transfer-Encoding
	Length                 // Content-Length bytes
	Chunked                // chunked transfer coding, ended by a zero chunk and trailers
	ToClose                // until the connection closes (responses only)
)

// Limits bound what the parser reads. The zero value of a field means
// its default.
type Limits struct {
	MaxHead int // bytes of a request head or trailer section; default 1 MiB (server.max_header_bytes)
	MaxLine int // bytes of one line; default 64 KiB
}

// DefaultMaxHead and DefaultMaxLine are the Limits defaults, in bytes.
const (
	DefaultMaxHead = 1 << 20
	DefaultMaxLine = 64 << 10
)

func (l Limits) head() int {
	if l.MaxHead <= 0 {
		return DefaultMaxHead
	}
	return l.MaxHead
}

func (l Limits) line() int {
	if l.MaxLine <= 0 {
		return DefaultMaxLine
	}
	return l.MaxLine
}

// Request is a parsed request head. Its strings point into the
// connection's buffer and are valid until the request ends (see the
// package doc). A Request is reused for the next request on its
// connection.
type Request struct {
	Header
	method, target span
	minor          uint8 // HTTP/1.minor
	host           int32 // index of the Host field, or -1

	// Framing is the body's framing, Length its Content-Length (bytes;
	// meaningful for Length framing).
	Framing Framing
	Length  int64

	closeConn bool // Connection: close, or HTTP/1.0 without keep-alive
	upgrade   bool // Connection: upgrade with an Upgrade field
	expect100 bool // Expect: 100-continue

	// Body is the request body, read by the handler.
	Body *Body

	// Peer is the client's address as the connection reports it; TLS is
	// the connection's TLS state, nil on a cleartext connection.
	Peer netip.AddrPort
	TLS  *tls.ConnectionState
}

// Method returns the method as sent.
func (r *Request) Method() string { return r.str(r.method) }

// Target returns the request-target as sent (RFC 9112 §3.2).
func (r *Request) Target() string { return r.str(r.target) }

// Proto returns "HTTP/1.1" or "HTTP/1.0".
func (r *Request) Proto() string {
	if r.minor == 0 {
		return "HTTP/1.0"
	}
	return "HTTP/1.1"
}

// ProtoMinor returns the minor version: 0 or 1.
func (r *Request) ProtoMinor() int { return int(r.minor) }

// Host returns the Host field's value ("" when there is none). For an
// absolute-form target the host is the target's (RFC 9112 §3.2.2); the
// caller reads it from Target.
func (r *Request) Host() string {
	if r.host < 0 {
		return ""
	}
	return r.str(r.fields[r.host].value)
}

// Close reports whether the connection closes after this request: the
// client sent "Connection: close", or spoke HTTP/1.0 without keep-alive.
func (r *Request) Close() bool { return r.closeConn }

// Upgrade reports whether the client asked to switch protocols: an
// Upgrade field and "upgrade" among the Connection options (RFC 9110 §7.8).
func (r *Request) Upgrade() bool { return r.upgrade }

// ExpectContinue reports whether the client sent "Expect: 100-continue"
// and waits for a 100 (or a final status) before sending its body.
func (r *Request) ExpectContinue() bool { return r.expect100 }

// ParseRequest parses the request head at the start of b. It returns the
// head's length in bytes, including the empty line, or 0 and OK when b
// holds no complete head yet, or a Reason when b cannot start with a
// valid head within lim (a too long head or line is refused as soon as
// it is seen). r's strings point into b.
func ParseRequest(b []byte, r *Request, lim Limits) (int, Reason) {
	n, _, why := scanHead(b, 0, lim)
	if n == 0 || why != OK {
		return 0, why
	}
	return n, r.parse(b[:n])
}

// scanHead finds the end of the head at the start of b, resuming at from
// (0, or the next a previous call returned for a prefix of b). It returns
// the head's length, or 0 and where to resume when incomplete.
func scanHead(b []byte, from int, lim Limits) (n, next int, why Reason) {
	maxLine, maxHead := lim.line(), lim.head()
	start := from
	for {
		i := indexByte(b[start:], '\n')
		if i < 0 {
			if len(b)-start > maxLine {
				return 0, 0, LineTooLong
			}
			if len(b) > maxHead {
				return 0, 0, HeadTooLarge
			}
			return 0, start, OK
		}
		end := start + i
		if end == start || b[end-1] != '\r' {
			return 0, 0, BareLF
		}
		if end-1-start > maxLine {
			return 0, 0, LineTooLong
		}
		if end+1 > maxHead {
			return 0, 0, HeadTooLarge
		}
		if end-1 == start && start > 0 {
			return end + 1, 0, OK
		}
		start = end + 1
	}
}
