// Package reqview is the one view of a request that everything past the
// HTTP engine reads (View): routes match its method, its Host and its path
// read as nginx reads them before location matching, while the request
// itself, forwarded byte for byte, is left as the client sent it; key
// sources, real IP, the access log and forward-auth read its header fields
// in place (Headers), whichever engine parsed them. A request rlproxy cannot read unambiguously — a
// method, target, Host or Content-Length nginx answers with 400 — is
// refused with its Reason before any route sees it, on every listener
// (HTTP/1.1 plain or TLS, HTTP/2 over TLS or h2c): a limited route cannot
// be walked around by a spelling the upstream reads otherwise.
package reqview

import (
	"crypto/tls"
	"net/http"
	"net/netip"
	"strings"
)

// Reason is why a request is refused with 400 before routing; OK is none.
// Its String is the reason label of rlproxy_bad_requests_total.
type Reason uint8

// Reasons, in the metric's words.
const (
	OK                  Reason = iota
	BadMethod                  // "method": other than upper-case letters, "_" and "-"
	BadTarget                  // "target": neither origin form nor absolute form with a host
	BadPath                    // "path": a bad or NUL %-escape, or ".." above the root
	BadHost                    // "host": a Host nginx refuses
	BadContentLength           // "content_length": not digits, or values that differ
	DuplicateCredential        // "duplicate_credential": a credential sent twice

	// NumReasons is one past the last Reason, to size tables by Reason.
	NumReasons
)

var reasonNames = [NumReasons]string{
	OK:                  "",
	BadMethod:           "method",
	BadTarget:           "target",
	BadPath:             "path",
	BadHost:             "host",
	BadContentLength:    "content_length",
	DuplicateCredential: "duplicate_credential",
}

// String returns the reason's metric label value ("" for OK).
func (r Reason) String() string { return reasonNames[r] }

// View is one request as every part of rlproxy past the engine reads it:
// routes match it, policies key it, real IP, the access log and
// forward-auth read it. Both HTTP engines provide it without building a
// map (net/http's through Read and StdHeaders). Method, Host and Path are
// what routes match: Method as sent, Host without port, brackets or
// trailing dot (compared case-insensitively), and the normalized Path (see
// Path); the other fields are the request as received.
type View struct {
	Method string
	Host   string
	Path   string

	// Target is the request target as sent (RFC 9112 §3.2): origin form
	// "/p?q", absolute form, "*" or a CONNECT authority.
	Target string
	// RawPath is Target's path as sent, before normalization: the
	// origin-form path, an absolute form's path after its authority ("/"
	// when it has none), or for any other target the bytes before "?".
	RawPath string
	// Query is Target's query as sent, without the "?": "" for none.
	Query string
	// RawHost is the Host (or HTTP/2 :authority) as sent, port included.
	RawHost string
	// Proto is the protocol version as net/http spells it: "HTTP/1.1",
	// "HTTP/1.0", "HTTP/2.0".
	Proto string
	// Header reads the request's header fields in place.
	Header Headers
	// Peer is the TCP peer (after the PROXY protocol, if any); the zero
	// AddrPort when it is unknown, its port 0 when none was given.
	Peer netip.AddrPort
	// TLS is the connection's TLS state; nil on a cleartext connection.
	TLS *tls.ConnectionState
}

// Read returns r's view, or with it the Reason r is refused with. The
// view's request fields (Target to TLS) are filled whatever the Reason,
// for the access log; Host and Path as far as Resolve got. Header is
// r.Header as StdHeaders (no copy). Besides Resolve's checks it refuses
// what only net/http's reading leaves to check: every Content-Length value
// of an HTTP/2 request must be 1*DIGIT and all equal (net/http checks an
// HTTP/1 request's, not an HTTP/2 one's), and a repeated Authorization
// field, which nginx refuses whatever reads it. It does not allocate
// unless the path needs normalizing.
func Read(r *http.Request) (View, Reason) {
	v := View{
		Method: r.Method, Target: r.RequestURI, RawHost: r.Host, Proto: r.Proto,
		Header: StdHeaders(r.Header), Peer: peer(r.RemoteAddr), TLS: r.TLS,
	}
	if v.Proto == "" { // a request built in code: net/http's server always sets it
		v.Proto = protoName(r.ProtoMajor, r.ProtoMinor)
	}
	return v, Check(&v, r)
}

// Check is Read's verdict on a view v filled from r's fields, or from those
// r describes (forward-auth): v.Resolve's, then what only net/http's
// reading of r leaves to check, on r's header fields.
func Check(v *View, r *http.Request) Reason {
	if reason := v.Resolve(); reason != OK {
		return reason
	}
	if r.ProtoMajor == 2 && !contentLength(r.Header["Content-Length"]) {
		return BadContentLength
	}
	if len(r.Header["Authorization"]) > 1 {
		return DuplicateCredential
	}
	return OK
}

// Resolve sets v's RawPath, Query, Host and Path from its Method, Target,
// RawHost and Proto, and returns the Reason the request is refused with,
// or OK. It checks, in order: the method (Method); the request target —
// origin form, or absolute form with a host and no userinfo, with no byte
// below 0x21, DEL or "#" anywhere (so "OPTIONS *", "x:admin/x",
// "other.test:80" and "http://user:pw@host/" are refused, as nginx refuses
// them; a CONNECT's authority form is left to the caller, which refuses
// CONNECT); the Host (Host; an empty one on HTTP/1.1); the path (Path).
// An engine calls it on the view it fills; its parser refuses a repeated
// Authorization field and a bad Content-Length itself. It does not
// allocate unless the path needs normalizing.
func (v *View) Resolve() Reason {
	v.RawPath, v.Query = splitTarget(v.Target)
	if !Method(v.Method) {
		return BadMethod
	}
	if v.Method != http.MethodConnect {
		raw, clean, ok := rawPath(v.Target)
		if !ok {
			return BadTarget
		}
		v.RawPath = raw
		if clean {
			v.Path = raw
		} else if v.Path, ok = normalize(raw); !ok {
			return BadPath
		}
	}
	if v.RawHost == "" && v.Proto == "HTTP/1.1" {
		// net/http refuses an HTTP/1.1 request without Host itself:
		// this one sent "Host:" empty, which nginx refuses.
		return BadHost
	}
	if v.RawHost != "" {
		h, ok := Host(v.RawHost)
		if !ok {
			return BadHost
		}
		if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
			h = h[1 : len(h)-1]
		}
		v.Host = h
	}
	return OK
}

// protoName spells HTTP/major.minor as net/http does ("" beyond HTTP/2).
func protoName(major, minor int) string {
	switch {
	case major == 1 && minor == 0:
		return "HTTP/1.0"
	case major == 1 && minor == 1:
		return "HTTP/1.1"
	case major == 2:
		return "HTTP/2.0"
	}
	return ""
}

// splitTarget returns the bytes of target before its first "?" and those
// after it.
func splitTarget(target string) (path, query string) {
	if i := strings.IndexByte(target, '?'); i >= 0 {
		return target[:i], target[i+1:]
	}
	return target, ""
}

// peer parses net/http's RemoteAddr ("ip:port"; a bare address is taken
// with port 0); the zero AddrPort when it is neither.
func peer(remote string) netip.AddrPort {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap
	}
	a, _ := netip.ParseAddr(remote)
	return netip.AddrPortFrom(a, 0)
}

// Method reports whether m is a method rlproxy forwards, by nginx 1.22's
// rule: upper-case letters, "_" and "-" only (every method in the IANA
// registry; all are RFC 9110 §9.1 tokens). Methods are case-sensitive:
// "post" is not POST to rlproxy's routes but is POST to many frameworks,
// so it is refused, as nginx refuses it.
func Method(m string) bool {
	if m == "" {
		return false
	}
	for i := 0; i < len(m); i++ {
		if c := m[i]; (c < 'A' || c > 'Z') && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// Host returns the host of a Host value h as nginx 1.22's
// ngx_http_validate_host reads it — the port cut off, one trailing dot
// dropped ("api.test." is api.test), an IP literal kept with its brackets
// — and false where nginx answers 400: "..", "/", a byte below 0x21 or
// DEL, or nothing left. Case is kept: routes compare hosts
// case-insensitively.
func Host(h string) (string, bool) {
	const (
		usual = iota
		literal
		rest
	)
	dot, n, st := -2, len(h), usual
	for i := 0; i < len(h); i++ {
		if hostClass[h[i]] == plain {
			continue
		}
		switch c := h[i]; c {
		case '.':
			if dot == i-1 {
				return "", false
			}
			dot = i
		case ':':
			if st == usual {
				n, st = i, rest
			}
		case '[':
			if i == 0 {
				st = literal
			}
		case ']':
			if st == literal {
				n, st = i+1, rest
			}
		default: // "/", a byte below 0x21, DEL
			return "", false
		}
	}
	if dot == n-1 {
		n--
	}
	if n <= 0 {
		return "", false
	}
	return h[:n], true
}

// rawPath returns the escaped path of a request target (origin form, or
// the path of an absolute form: "/" when it has none) and whether it is
// clean (no "%", "//" or "/.": Path would return it as it is); ok is false
// for any other form or a target holding a byte nginx refuses in a
// request line.
func rawPath(target string) (raw string, clean, ok bool) {
	if target == "" {
		return "", false, false
	}
	if target[0] != '/' {
		if target, ok = absolutePath(target); !ok {
			return "", false, false
		}
	}
	end, clean := len(target), true
	for i := 0; i < len(target); i++ {
		switch targetClass[target[i]] {
		case plain:
		case refused:
			return "", false, false
		case query:
			if end == len(target) {
				end = i
			}
		case percent:
			clean = clean && end < i
		case slash:
			if i+1 < len(target) && (target[i+1] == '/' || target[i+1] == '.') {
				clean = clean && end < i
			}
		}
	}
	return target[:end], clean, true
}

// Byte classes of targetClass and hostClass.
const (
	plain   = iota
	refused // below 0x21, DEL, and "#" in a target or "/" in a Host
	query   // "?"
	percent // "%"
	slash   // "/"
	special // ".", ":", "[", "]" in a Host
)

// targetClass and hostClass classify bytes for rawPath's and Host's
// loops: one table load per byte for the plain ones.
var targetClass, hostClass = func() (t, h [256]byte) {
	for c := range 0x21 {
		t[c], h[c] = refused, refused
	}
	t[0x7f], h[0x7f] = refused, refused
	t['#'], t['?'], t['%'], t['/'] = refused, query, percent, slash
	h['/'], h['.'], h[':'], h['['], h[']'] = refused, special, special, special, special
	return t, h
}()

// absolutePath returns what follows the authority of an absolute-form
// target ("http://host:80/p?q" → "/p?q", "http://host" → "/"), false
// unless it is scheme "://" host [":" port], the host being what nginx's
// request-line parser takes (letters, digits, "." and "-", or an IP
// literal in brackets): no userinfo, no empty host.
func absolutePath(t string) (string, bool) {
	i := 0
	for i < len(t) && (isAlpha(t[i]) || i > 0 && (isDigit(t[i]) || t[i] == '+' || t[i] == '-' || t[i] == '.')) {
		i++
	}
	if i == 0 || len(t) < i+3 || t[i:i+3] != "://" {
		return "", false
	}
	t = t[i+3:]
	end := len(t)
	for j := 0; j < len(t); j++ {
		if t[j] == '/' || t[j] == '?' {
			end = j
			break
		}
	}
	if !validAuthority(t[:end]) {
		return "", false
	}
	if end == len(t) || t[end] == '?' {
		return "/" + t[end:], true // nginx's empty path is "/"
	}
	return t[end:], true
}

// validAuthority reports whether a is host [":" port] as nginx 1.22's
// ngx_http_parse_request_line accepts it in an absolute-form target.
func validAuthority(a string) bool {
	i := 0
	if len(a) > 0 && a[0] == '[' {
		for i = 1; i < len(a) && a[i] != ']'; i++ {
			if !isAlpha(a[i]) && !isDigit(a[i]) && strings.IndexByte(":-._~!$&'()*+,;=", a[i]) < 0 {
				return false
			}
		}
		if i == len(a) {
			return false
		}
		i++
	} else {
		for i < len(a) && (isAlpha(a[i]) || isDigit(a[i]) || a[i] == '.' || a[i] == '-') {
			i++
		}
		if i == 0 {
			return false
		}
	}
	if i == len(a) {
		return true
	}
	if a[i] != ':' {
		return false
	}
	for i++; i < len(a); i++ {
		if !isDigit(a[i]) {
			return false
		}
	}
	return true
}

// contentLength reports whether every Content-Length value is 1*DIGIT
// (RFC 9110 §8.6) and they are all the same.
func contentLength(vs []string) bool {
	for i, v := range vs {
		if v == "" || v != vs[0] && i > 0 {
			return false
		}
		for j := 0; j < len(v); j++ {
			if !isDigit(v[j]) {
				return false
			}
		}
	}
	return true
}

func isAlpha(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
