// Package clientkey turns a request into the client id of one policy's key
// spec (docs/CONTRACT.md "Key sources"): the string inside the Valkey hash tag of
// `<key_prefix>v2:{<client>}:<policy>` (DESIGN.md "Key format").
//
// # Forms
//
//   - "ip:192.0.2.7", "ip:2001:db8::1": the client address in RFC 5952
//     canonical form, IPv4-mapped addresses unmapped, zone dropped. With
//     ipv4_prefix < 32 or ipv6_prefix < 128 the address is masked and the
//     length appended: "ip:192.0.2.0/24", "ip:2001:db8:1:2::/64".
//   - "h:<32 hex digits>": a credential (header, query parameter, cookie,
//     JWT claim or client certificate field), never stored or logged verbatim (docs/CONTRACT.md): the first
//     128 bits of HMAC-SHA256 (RFC 2104) keyed with the store's hash secret,
//     over the source kind and name and the value, so the same value in a
//     header and in a cookie are two clients.
//   - "t:<32 hex digits>": a combined key (combine: true), the same keyed
//     hash over the tuple of every source, absent members included as absent.
//   - "global": one budget shared by every client.
//
// Ids use only [0-9a-z:./] and are at most 46 bytes ("ip:" + 39 + "/128"),
// so they can never break out of the hash tag ("{", "}") or the key, and a
// 64 KB header costs one hash, never a 64 KB key.
//
// A source is absent when its value is missing, empty or only whitespace;
// with a list the first present source wins, and when all are absent the key
// is the ip key. ip and global are always present.
//
// # JWT claims: signatures
//
// WARNING: with no hmac_secret_env (config.JWT.HMACSecret nil) a jwt:CLAIM
// source does NOT verify the token's signature: anyone can mint a token with
// any claim, so the claim is only as good as the client's word, and a client
// that changes its claim gets a fresh budget. Use unverified claims only
// where the upstream verifies the same token and a forged one is refused
// there, and never for security limits (login, OTP). With a secret, only
// HS256 tokens (RFC 7515, RFC 7518 section 3.2) whose signature verifies and
// that are inside their exp/nbf window (RFC 7519 section 4.1.4-5, no leeway)
// count; any other token is absent.
//
// The same holds, without any check, for header, query and cookie sources:
// a credential the proxy does not verify is whatever the client sends.
package clientkey

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"net/netip"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"rlproxy/internal/config"
	"rlproxy/internal/reqview"
)

// hashBytes is how much of the HMAC-SHA256 a hashed id keeps: 128 bits,
// 32 hex digits (DESIGN.md "Key format").
const hashBytes = 16

// MaxLen is the longest id Key appends, in bytes: "ip:" plus a full IPv6
// address (39) plus "/128".
const MaxLen = len("ip:ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128")

// Extractor computes the client id of requests for one key spec. It is
// immutable and safe for concurrent use; build it with New.
type Extractor struct {
	sources []source
	combine bool
	v4Bits  int // ipv4_prefix, 1..32
	v6Bits  int // ipv6_prefix, 1..128
	// jwtSecret verifies HS256 tokens; nil = unverified (see package doc).
	jwtSecret []byte
	// hashers pools keyed HMAC states: hmac.New allocates, and a hasher is
	// not safe for concurrent use.
	hashers sync.Pool
	// collectors pools *reqview.Collector values for fields a request may send
	// on several lines (Cookie).
	collectors sync.Pool
	// now is the clock for JWT exp/nbf (time.Now; tests inject one).
	now func() time.Time
}

// source is one compiled key source.
type source struct {
	kind config.SourceKind
	name string // canonical header key for headers; as configured otherwise
	// tag starts the hashed input: kind byte, name, 0. It separates
	// "header:X-Key=v" from "cookie:X-Key=v".
	tag []byte
}

// New compiles spec. A zero IPv4Prefix or IPv6Prefix means the default (32,
// 128); empty Sources means ip. jwt supplies the HS256 secret of jwt:CLAIM
// sources (nil: unverified). hashSecret keys the credential hash; every
// instance sharing a store needs the same one. It may be empty, but then the
// hash is unkeyed and a low-entropy credential can be recovered from the
// store's key names by guessing. spec and jwt are as package config
// validated them (prefixes in range, every named source with its name, a
// JWT secret of at least 32 bytes: internal/config/policy.go, sections.go);
// New returns an error only for a source kind it does not know.
func New(spec config.KeySpec, jwt config.JWT, hashSecret []byte) (*Extractor, error) {
	e := &Extractor{
		combine:   spec.Combine,
		v4Bits:    spec.IPv4Prefix,
		v6Bits:    spec.IPv6Prefix,
		jwtSecret: jwt.HMACSecret,
		now:       time.Now,
	}
	if e.v4Bits == 0 {
		e.v4Bits = 32
	}
	if e.v6Bits == 0 {
		e.v6Bits = 128
	}
	srcs := spec.Sources
	if len(srcs) == 0 {
		srcs = []config.Source{{Kind: config.SourceIP}}
	}
	for _, s := range srcs {
		c := source{kind: s.Kind, name: s.Name}
		switch s.Kind {
		case config.SourceIP, config.SourceGlobal:
			c.name = ""
		case config.SourceHeader:
			c.name = textproto.CanonicalMIMEHeaderKey(s.Name)
		case config.SourceQuery, config.SourceCookie, config.SourceJWT, config.SourceTLS:
		default:
			return nil, fmt.Errorf("key source kind %d: unknown", s.Kind)
		}
		c.tag = append(append([]byte{byte(s.Kind)}, c.name...), 0)
		e.sources = append(e.sources, c)
	}
	e.collectors.New = func() any { return reqview.NewCollector() }
	e.hashers.New = func() any {
		return &hasher{mac: hmac.New(sha256.New, hashSecret)}
	}
	return e, nil
}

// Key appends the client id of request v to dst and returns the extended slice
// (append style, like strconv.AppendInt, so the caller can build the whole
// store key in one reused buffer). clientIP is the request's client address
// from realip. With a reused dst the ip, global, header, query and cookie
// paths do not allocate (a query value with %-escapes and JWT claims do).
func (e *Extractor) Key(dst []byte, v *reqview.View, clientIP netip.Addr) []byte {
	dst, _, _ = e.CredentialKey(dst, v, clientIP)
	return dst
}

// CredentialKey is Key, also returning the Sum a credential's id ("h:…")
// spells, ok false for any other id (ip, global, combined): a plan index
// looks it up without decoding the id.
func (e *Extractor) CredentialKey(dst []byte, v *reqview.View, clientIP netip.Addr) (id []byte, sum Sum, ok bool) {
	if e.combine {
		return e.appendTuple(dst, v, clientIP), sum, false
	}
	for i := range e.sources {
		s := &e.sources[i]
		switch s.kind {
		case config.SourceIP:
			return e.appendIP(dst, clientIP), sum, false
		case config.SourceGlobal:
			return append(dst, "global"...), sum, false
		}
		if val, ok := e.value(s, v); ok {
			h := e.hashers.Get().(*hasher)
			h.start('h')
			field(h, s.tag, true, val)
			dst, sum = h.appendSum(append(dst, "h:"...))
			e.hashers.Put(h)
			return dst, sum, true
		}
	}
	return e.appendIP(dst, clientIP), sum, false
}

// appendTuple appends the "t:" id of every source together, or the ip id
// when every member is absent.
func (e *Extractor) appendTuple(dst []byte, v *reqview.View, clientIP netip.Addr) []byte {
	h := e.hashers.Get().(*hasher)
	defer e.hashers.Put(h)
	h.start('t')
	present := false
	var ipBuf [MaxLen]byte
	for i := range e.sources {
		s := &e.sources[i]
		switch s.kind {
		case config.SourceIP:
			field(h, s.tag, true, e.appendIP(ipBuf[:0], clientIP))
			present = true
		case config.SourceGlobal:
			field(h, s.tag, true, "")
			present = true
		default:
			val, ok := e.value(s, v)
			field(h, s.tag, ok, val)
			present = present || ok
		}
	}
	if !present {
		return e.appendIP(dst, clientIP)
	}
	dst, _ = h.appendSum(append(dst, "t:"...))
	return dst
}

// appendIP appends the ip id of a: unmapped, zone dropped, masked to the
// spec's prefix with "/N" when shorter than the address.
func (e *Extractor) appendIP(dst []byte, a netip.Addr) []byte {
	dst = append(dst, "ip:"...)
	a = a.Unmap().WithZone("")
	if !a.IsValid() {
		return append(dst, "invalid"...) // realip never returns one
	}
	bits := e.v6Bits
	if a.Is4() {
		bits = e.v4Bits
	}
	if bits == a.BitLen() {
		return a.AppendTo(dst)
	}
	p, _ := a.Prefix(bits) // bits is in range for a's family: no error
	dst = p.Addr().AppendTo(dst)
	dst = append(dst, '/')
	return strconv.AppendInt(dst, int64(bits), 10)
}

// value returns the credential of a header, query, cookie or jwt source and
// whether it is present (non-empty after trimming whitespace).
func (e *Extractor) value(s *source, r *reqview.View) (string, bool) {
	var v string
	switch s.kind {
	case config.SourceHeader:
		v, _ = r.Header.Get(s.name) // as http.Header.Get: the first line
	case config.SourceQuery:
		v = queryValue(r.Query, s.name)
	case config.SourceCookie:
		c := e.collectors.Get().(*reqview.Collector)
		v = cookieValue(c.Values(r.Header, "Cookie"), s.name)
		c.Release()
		e.collectors.Put(c)
	case config.SourceJWT:
		auth, _ := r.Header.Get("Authorization")
		v = e.jwtClaim(auth, s.name)
	case config.SourceTLS:
		v = certField(r.TLS, s.name)
	}
	v = strings.TrimSpace(v)
	return v, v != ""
}

// queryValue returns the first value of parameter name in a raw query, as
// url.Values.Get(name) after url.ParseQuery would, without building the map:
// pairs holding ";" or a bad %-escape are skipped, "+" is a space. Escaped
// keys and values are unescaped, so "%61bc" and "abc" are one client.
func queryValue(q, name string) string {
	for q != "" {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		if strings.Contains(kv, ";") {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		if k, ok := unescapeQuery(k); !ok || k != name {
			continue
		}
		if v, ok := unescapeQuery(v); ok {
			return v
		}
	}
	return ""
}

// unescapeQuery is url.QueryUnescape, skipped (no allocation) when there is
// nothing to unescape.
func unescapeQuery(s string) (string, bool) {
	if !strings.ContainsAny(s, "%+") {
		return s, true
	}
	u, err := url.QueryUnescape(s)
	return u, err == nil
}

// cookieValue returns the value of the first cookie called name in the
// Cookie header lines (RFC 6265 section 5.4: "name=value" pairs separated by
// ";"), its double quotes removed as net/http does, without parsing the
// other cookies into http.Cookie values.
func cookieValue(lines []string, name string) string {
	for _, line := range lines {
		for line != "" {
			var part string
			part, line, _ = strings.Cut(line, ";")
			k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
			if !ok || k != name {
				continue
			}
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v
		}
	}
	return ""
}

// jwtClaim returns claim of the bearer token in the (first) Authorization
// value auth (RFC 6750 section 2.1), as its string value or its JSON number literal, or ""
// when there is no token, it is malformed, the claim is missing or of
// another type, or (with a secret) the token does not verify.
func (e *Extractor) jwtClaim(auth, claim string) string {
	scheme, token, _ := strings.Cut(strings.TrimSpace(auth), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	token = strings.TrimSpace(token)
	head, rest, ok1 := strings.Cut(token, ".")
	body, sig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(sig, ".") {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return ""
	}
	var claims map[string]json.RawMessage
	if json.Unmarshal(payload, &claims) != nil {
		return ""
	}
	if e.jwtSecret != nil && !e.verify(token[:len(head)+1+len(body)], head, sig, claims) {
		return ""
	}
	raw := bytes.TrimSpace(claims[claim])
	if len(raw) == 0 {
		return ""
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	case c == '-' || '0' <= c && c <= '9':
		return string(raw) // the number as written: 42 and 42.0 are two ids
	}
	return "" // true, false, null, objects and arrays are not ids
}

// verify reports whether an HS256 token verifies with the secret and its
// exp and nbf (NumericDate, seconds) admit the current time. signed is
// "header.payload".
func (e *Extractor) verify(signed, head, sig string, claims map[string]json.RawMessage) bool {
	hb, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return false
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	// Only HS256: honouring "none" or another alg named by the token itself
	// is the classic JWT forgery.
	if json.Unmarshal(hb, &hdr) != nil || hdr.Alg != "HS256" {
		return false
	}
	got, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, e.jwtSecret)
	mac.Write([]byte(signed))
	if !hmac.Equal(got, mac.Sum(nil)) { // constant time
		return false
	}
	now := float64(e.now().Unix())
	if exp, ok := claims["exp"]; ok {
		var t float64
		if json.Unmarshal(exp, &t) != nil || now >= t {
			return false
		}
	}
	if nbf, ok := claims["nbf"]; ok {
		var t float64
		if json.Unmarshal(nbf, &t) != nil || now < t {
			return false
		}
	}
	return true
}

// hasher is one pooled keyed HMAC-SHA256 state with a scratch buffer, so
// strings are hashed without a []byte conversion (which would allocate).
type hasher struct {
	mac hash.Hash
	buf [256]byte
}

// start resets the state and writes the form byte ('h' or 't'), keeping the
// single-source and tuple hashes apart.
func (h *hasher) start(form byte) {
	h.mac.Reset()
	h.buf[0] = form
	h.mac.Write(h.buf[:1])
}

// field writes one source to h: its tag, presence, and the value's length
// (8 bytes, so ("ab","c") and ("a","bc") differ) and bytes. It is generic so
// that neither strings nor byte slices are converted (which would allocate).
func field[V string | []byte](h *hasher, tag []byte, present bool, v V) {
	h.mac.Write(tag)
	h.buf[0] = 0
	if present {
		h.buf[0] = 1
	}
	binary.BigEndian.PutUint64(h.buf[1:9], uint64(len(v)))
	h.mac.Write(h.buf[:9])
	for len(v) > 0 {
		n := copy(h.buf[:], v)
		h.mac.Write(h.buf[:n])
		v = v[n:]
	}
}

// sum is the first hashBytes of the MAC.
func (h *hasher) sum() (s Sum) {
	copy(s[:], h.mac.Sum(h.buf[:0]))
	return s
}

// appendSum appends the first hashBytes of the MAC, in lower-case hex,
// and returns them.
func (h *hasher) appendSum(dst []byte) ([]byte, Sum) {
	s := h.sum()
	return hex.AppendEncode(dst, s[:]), s
}

// Redact shortens an id for logs: a hashed id ("h:…", "t:…") to its form
// and first 12 hex digits (48 bits: enough to tell clients apart in a log,
// too little to match a store key); ip and global ids are returned as is.
func Redact(id string) string {
	const keep = len("h:") + 12
	if len(id) > keep && (strings.HasPrefix(id, "h:") || strings.HasPrefix(id, "t:")) {
		return id[:keep]
	}
	return id
}

// Sum is the 128 bits a credential id ("h:" and 32 hex digits) spells:
// an index of millions of credentials keeps these 16 bytes, not the id.
type Sum [hashBytes]byte

// Credentials appends to dst the Sum of the id Key would give a request
// carrying value in each of the spec's credential sources (header, query,
// cookie, jwt), in source order: a plan's credentials are compiled through
// it so that a request is matched to its plan by hashed id, never by the
// raw credential. It appends nothing for a combine spec or one without
// credential sources (their ids are not a function of one value), and
// allocates only to grow dst.
func (e *Extractor) Credentials(dst []Sum, value string) []Sum {
	if e.combine {
		return dst
	}
	h := e.hashers.Get().(*hasher)
	defer e.hashers.Put(h)
	for i := range e.sources {
		s := &e.sources[i]
		switch s.kind {
		case config.SourceIP, config.SourceGlobal:
			return dst // later sources are never reached (config refuses them)
		}
		h.start('h')
		field(h, s.tag, true, strings.TrimSpace(value))
		dst = append(dst, h.sum())
	}
	return dst
}
