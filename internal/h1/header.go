// Package h1 is rlproxy's HTTP/1.1 engine: a strict request and response
// parser that keeps a head as offsets into one reused buffer (no map, no
// string per field), a server connection loop (Serve), a writer that
// builds the upstream request head from the client's bytes with the
// proxy's edits applied on the way (HeadWriter), a response-head parser
// and body framing for the upstream side, and a keep-alive upstream
// connection pool (Pool). docs/ENGINE.md describes each mechanism and
// lists where the parser is stricter than net/http.
//
// Strings handed out by a Request or Response (Method, Target, Get, the
// callbacks of Values and Each) point into the connection's buffer: they
// are valid until the request (or response) ends, and must be copied to
// be kept longer.
package h1

import "unsafe"

// span is the half-open byte range [off, end) of a head buffer.
type span struct{ off, end uint32 }

// field is one header field line: its name and its value, the value
// without the optional whitespace around it (RFC 9112 §5).
type field struct{ name, value span }

// Header is the fields of a parsed head, in the order and case they were
// sent. The zero Header has no fields.
type Header struct {
	buf    []byte
	fields []field
}

// str returns s as a string over the head buffer, without copying.
func (h *Header) str(s span) string {
	if s.end == s.off {
		return ""
	}
	return unsafe.String(&h.buf[s.off], int(s.end-s.off))
}

// Len returns the number of field lines.
func (h *Header) Len() int { return len(h.fields) }

// Get returns the value of the first field named name (compared
// ASCII case-insensitively) and whether there is one.
func (h *Header) Get(name string) (string, bool) {
	for _, f := range h.fields {
		if h.nameIs(f, name) {
			return h.str(f.value), true
		}
	}
	return "", false
}

// Values calls fn with the value of each field named name (compared
// ASCII case-insensitively), in the order sent, until fn returns false.
// A value is one field line's, not split at commas.
func (h *Header) Values(name string, fn func(string) bool) {
	for _, f := range h.fields {
		if h.nameIs(f, name) && !fn(h.str(f.value)) {
			return
		}
	}
}

// Each calls fn with every field's name and value as sent, in order,
// until fn returns false.
func (h *Header) Each(fn func(name, value string) bool) {
	for _, f := range h.fields {
		if !fn(h.str(f.name), h.str(f.value)) {
			return
		}
	}
}

// nameIs reports whether f's name is name, ASCII case-insensitively.
func (h *Header) nameIs(f field, name string) bool {
	return int(f.name.end-f.name.off) == len(name) && equalFold(h.buf[f.name.off:f.name.end], name)
}

// unsafeString views b as a string without copying; b must not change
// while the string is used.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// unsafeBytes views s as bytes without copying; they must not be
// written.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// appendTrailer appends h's fields as field lines, but those a trailer
// must not carry (notTrailer).
func appendTrailer(dst []byte, h *Header) []byte {
	for _, f := range h.fields {
		name := h.buf[f.name.off:f.name.end]
		if notTrailer(name) {
			continue
		}
		dst = appendFieldBytes(dst, name, h.buf[f.value.off:f.value.end])
	}
	return dst
}

// forbiddenTrailers are the fields RFC 9110 §6.5.1 keeps out of a
// trailer (framing, routing, request modifiers, authentication, response
// control), net/http's list (badTrailer) that its server refuses when
// a Trailer field declares them: a recipient that merges trailers into
// the head would otherwise take a Host, Content-Length or Authorization
// the proxy never saw in the head it routed and charged.
var forbiddenTrailers = [...]string{"authorization", "cache-control", "connection", "content-encoding",
	"content-length", "content-range", "content-type", "expect", "host", "keep-alive", "max-forwards",
	"pragma", "proxy-authenticate", "proxy-authorization", "proxy-connection", "range", "realm", "te",
	"trailer", "transfer-encoding", "www-authenticate", "upgrade"}

// notTrailer reports whether name is one of forbiddenTrailers.
func notTrailer(name []byte) bool {
	for _, f := range forbiddenTrailers {
		if equalFold(name, f) {
			return true
		}
	}
	return false
}

// reset empties h over buf, keeping the field slice's capacity.
func (h *Header) reset(buf []byte) {
	h.buf = buf
	h.fields = h.fields[:0]
}

// equalFold reports whether b equals s ASCII case-insensitively; s is
// expected in lower case or any case (both sides are folded).
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		if lower(b[i]) != lower(s[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// eachToken calls fn with each comma-separated element of a list field
// value (RFC 9110 §5.6.1), without surrounding whitespace, skipping empty
// elements, until fn returns false.
func eachToken(v []byte, fn func([]byte) bool) {
	for len(v) > 0 {
		i := 0
		for i < len(v) && v[i] != ',' {
			i++
		}
		t := trimOWS(v[:i])
		if len(t) > 0 && !fn(t) {
			return
		}
		if i == len(v) {
			return
		}
		v = v[i+1:]
	}
}

// hasToken reports whether the list value v holds tok, case-insensitively.
func hasToken(v []byte, tok string) bool {
	found := false
	eachToken(v, func(t []byte) bool {
		found = equalFold(t, tok)
		return !found
	})
	return found
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}
