package h1

import "strconv"

// FieldEdit is one field the proxy sets or adds on the way through.
type FieldEdit struct {
	Name, Value string
}

// Edits are the changes a head undergoes on its way through the proxy.
// Fields not named keep their place, name case and value. The zero value
// changes nothing but the hop-by-hop fields.
type Edits struct {
	// Drop names fields removed (ASCII case-insensitive), e.g. the
	// route's headers.remove.
	Drop []string
	// Set replaces the value of the first field of each name in place
	// (later fields of that name are dropped), or appends the field when
	// the head has none: the Host policy, X-Real-IP, X-Request-Id.
	Set []FieldEdit
	// Add appends fields after the sent ones: X-Forwarded-For with the
	// client appended, Forwarded, quota headers, Retry-After.
	Add []FieldEdit
	// Upgrade keeps Upgrade and writes "Connection: upgrade": the handler
	// allowed the protocol the client asked for.
	Upgrade bool
}

// hopByHop reports whether name is a field that describes one connection,
// never forwarded (RFC 9110 §7.6.1; net/http/httputil's list, less
// Transfer-Encoding and Trailer, which the engine keeps because it
// forwards chunked bodies and trailers as chunked, and plus
// HTTP2-Settings, RFC 9113 §3.1's h2c upgrade field). Upgrade is dropped
// unless Edits.Upgrade. The switch on the length skips most names at once.
func hopByHop(name []byte) bool {
	switch len(name) {
	case 2:
		return equalFold(name, "te")
	case 10:
		return equalFold(name, "connection") || equalFold(name, "keep-alive")
	case 14:
		return equalFold(name, "http2-settings")
	case 16:
		return equalFold(name, "proxy-connection")
	case 18:
		return equalFold(name, "proxy-authenticate")
	case 19:
		return equalFold(name, "proxy-authorization")
	}
	return false
}

// AppendRequest appends to dst the head to send upstream for r: the
// request line with target (r.Target() to keep it) as HTTP/1.1, then r's
// fields edited by e, then the empty line.
func AppendRequest(dst []byte, r *Request, target string, e *Edits) []byte {
	dst = append(dst, r.Method()...)
	dst = append(dst, ' ')
	dst = append(dst, target...)
	dst = append(dst, " HTTP/1.1\r\n"...)
	return appendFields(dst, &r.Header, e, false)
}

// AppendResponse appends to dst the head to send the client for the
// upstream's response p: "HTTP/1.1" and p's status code and reason, then
// p's fields edited by e ("Connection: close" added when closing), then
// the empty line. A body framed for the close is re-framed by the caller:
// dropChunked removes Transfer-Encoding (an HTTP/1.0 client gets the
// decoded body up to the close).
func AppendResponse(dst []byte, p *Response, e *Edits, closing, dropChunked bool) []byte {
	dst = AppendStatusLine(dst, p.Status, p.Reason())
	if closing {
		dst = append(dst, "Connection: close\r\n"...)
	}
	return appendFields(dst, &p.Header, e, dropChunked)
}

// AppendStatusLine appends "HTTP/1.1 code reason\r\n".
func AppendStatusLine(dst []byte, code int, reason string) []byte {
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, ' ')
	dst = append(dst, reason...)
	return append(dst, "\r\n"...)
}

// AppendField appends "name: value\r\n".
func AppendField(dst []byte, name, value string) []byte {
	return appendFieldBytes(dst, unsafeBytes(name), unsafeBytes(value))
}

// appendFieldBytes appends "name: value\r\n": a field as sent, its
// whitespace around the value made one space, as nginx writes it.
func appendFieldBytes(dst, name, value []byte) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	dst = append(dst, value...)
	return append(dst, "\r\n"...)
}

// appendFields writes h's fields edited by e, e's additions and the empty
// line.
func appendFields(dst []byte, h *Header, e *Edits, dropTE bool) []byte {
	var setDone uint64 // bit i: Set[i] written (the first 64 Set fields)
	named := connectionOptions(h)
	for _, f := range h.fields {
		name := h.buf[f.name.off:f.name.end]
		if dropped(h, name, e, named) || dropTE && equalFold(name, "transfer-encoding") {
			continue
		}
		value := h.buf[f.value.off:f.value.end]
		if i := setIndex(name, e); i >= 0 {
			if i < 64 && setDone&(1<<i) != 0 {
				continue
			}
			setDone |= 1 << (i & 63)
			value = unsafeBytes(e.Set[i].Value)
		}
		dst = appendFieldBytes(dst, name, value)
	}
	for i, s := range e.Set {
		if i >= 64 || setDone&(1<<i) == 0 {
			dst = AppendField(dst, s.Name, s.Value)
		}
	}
	for _, a := range e.Add {
		dst = AppendField(dst, a.Name, a.Value)
	}
	if e.Upgrade {
		dst = append(dst, "Connection: upgrade\r\n"...)
	}
	return append(dst, "\r\n"...)
}

// dropped reports whether a field named name is not forwarded: a
// hop-by-hop field, a field the Connection field names (but the framing
// fields and Host: connectionProof), Upgrade unless allowed, or one of
// e.Drop.
func dropped(h *Header, name []byte, e *Edits, named bool) bool {
	if hopByHop(name) {
		return true
	}
	if equalFold(name, "upgrade") {
		return !e.Upgrade
	}
	for _, d := range e.Drop {
		if equalFold(name, d) {
			return true
		}
	}
	return named && !connectionProof(name) && connectionNames(h, name)
}

// connectionProof reports whether name is a field a Connection option
// cannot remove: Content-Length and Transfer-Encoding frame the body the
// engine forwards as the sender framed it, so a head without them would
// leave the body to be read as the next message (request smuggling,
// "Connection: Content-Length"); Host routes the request (RFC 9112 §3.2:
// an HTTP/1.1 request without it is invalid). net/http's proxy keeps all
// three out of its header map, so a Connection option never removes them.
func connectionProof(name []byte) bool {
	switch len(name) {
	case 4:
		return equalFold(name, "host")
	case 14:
		return equalFold(name, "content-length")
	case 17:
		return equalFold(name, "transfer-encoding")
	}
	return false
}

// connectionOptions reports whether a Connection field of h names a
// field: an option other than close, keep-alive and upgrade (fields
// dropped anyway), so most heads skip connectionNames.
func connectionOptions(h *Header) bool {
	named := false
	for _, f := range h.fields {
		if !equalFold(h.buf[f.name.off:f.name.end], "connection") {
			continue
		}
		eachToken(h.buf[f.value.off:f.value.end], func(t []byte) bool {
			named = !equalFold(t, "close") && !equalFold(t, "keep-alive") && !equalFold(t, "upgrade")
			return !named
		})
		if named {
			return true
		}
	}
	return false
}

// connectionNames reports whether a Connection field of h lists name
// (RFC 9110 §7.6.1: such fields are hop-by-hop too).
func connectionNames(h *Header, name []byte) bool {
	for _, f := range h.fields {
		if !equalFold(h.buf[f.name.off:f.name.end], "connection") {
			continue
		}
		found := false
		eachToken(h.buf[f.value.off:f.value.end], func(t []byte) bool {
			found = len(t) == len(name) && equalFold(t, unsafeString(name))
			return !found
		})
		if found {
			return true
		}
	}
	return false
}

func setIndex(name []byte, e *Edits) int {
	for i, s := range e.Set {
		if equalFold(name, s.Name) {
			return i
		}
	}
	return -1
}
