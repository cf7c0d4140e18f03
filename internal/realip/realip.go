// Package realip recovers the client address of a request from the TCP peer
// and the forwarding headers of trusted proxies, with the semantics of nginx's
// realip module (set_real_ip_from, real_ip_header, real_ip_recursive;
// ngx_http_realip_module.c and ngx_http_get_forwarded_addr_internal in
// ngx_http_core_module.c).
//
// # Spoofing
//
// X-Forwarded-For, X-Real-IP and Forwarded (RFC 7239) are ordinary request
// headers: any client can send "X-Forwarded-For: 1.2.3.4" and claim to be
// anyone. A limiter that believed it would give every request a fresh budget
// and let an attacker charge its traffic to a victim's address. So, as in
// nginx, the header is consulted only when the TCP peer itself is a trusted
// proxy (TrustedProxies, nginx set_real_ip_from), and only the hops that
// trusted proxies appended are believed: walking the list from the right,
// every trusted address passes the question on to the hop before it, and the
// first untrusted address is the client (real_ip_recursive on). RFC 7239
// section 8.1 makes the same point: the header can be forged by anyone
// upstream of the last proxy you control. Never list a CIDR in
// TrustedProxies that clients can send from.
//
// # The walk (nginx, exactly)
//
// The current address starts as the peer. While the current address is
// trusted, the next hop from the right is taken: when the list is exhausted
// the current address is the client (so when every hop is trusted the
// leftmost is the client); when the hop does not parse, the walk stops and
// the current address (the last good one: the peer or a trusted hop) is the
// client; otherwise the hop becomes the current address, and with
// Recursive off the walk ends there (the rightmost hop is the client).
//
// Each line is scanned from the right as nginx does: entries are split on
// spaces and commas, runs of separators count as one, and a line that is
// empty or starts with a separator ends in an entry that does not parse.
// An entry is an address, "IPv4:port" or "[IPv6]:port" (port 1..65535), as
// ngx_parse_addr_port accepts. Several X-Forwarded-For lines are walked last
// line first, as one list; with Recursive off only the last line counts.
// X-Real-IP uses its first line only, walked the same way (nginx's
// r->headers_in.x_real_ip). Deviations from nginx 1.22, all on inputs no
// proxy sends: IPv4 octets with leading zeros or missing ("010.0.0.1",
// "1..2.3") do not parse (nginx reads them as decimal, filling zeros; Go's
// net/netip refuses them, avoiding octal ambiguity), and IPv4-mapped
// addresses are unmapped (nginx reports them in IPv6 form).
// TestNginxDifferential checks the rest against a real nginx.
//
// Forwarded (RFC 7239, which nginx does not read) contributes one hop per
// element: its for= node ("192.0.2.60", "\"[2001:db8::1]:443\"", with an
// optional port or obfuscated port); an element without exactly one for=,
// with for=unknown, an obfuscated identifier ("_hidden") or a syntax error is
// a hop that does not parse, so it stops the walk.
//
// Every address is unmapped (::ffff:10.0.0.1 is 10.0.0.1) and the peer's
// zone is dropped before it is matched or returned (a zone in a header entry
// does not parse, as in nginx); matching is by address, never by spelling.
package realip

import (
	"fmt"
	"net/netip"
	"net/textproto"
	"strings"
	"sync"

	"rlproxy/internal/config"
	"rlproxy/internal/reqview"
)

// headerKind is which forwarding header a Resolver reads.
type headerKind uint8

const (
	kindXFF       headerKind = iota // X-Forwarded-For: every line, comma-separated
	kindXRealIP                     // X-Real-IP: first line
	kindForwarded                   // Forwarded: RFC 7239 for= of every element
)

// xffKey is the canonical X-Forwarded-For header key, read by ForwardedFor
// whatever header the Resolver walks.
const xffKey = "X-Forwarded-For"

// maxForwardedHops is how many Forwarded elements, counted from the right,
// a walk can reach. Forwarded is parsed left to right (quoted strings make a
// right-to-left scan ambiguous) into a fixed ring so that a long header costs
// no allocation; a walk that would go further treats the next hop as
// unparsable. Real proxy chains are a handful of hops.
const maxForwardedHops = 64

// Resolver finds the client address of requests. It is immutable and safe
// for concurrent use; build it with New.
type Resolver struct {
	kind      headerKind
	key       string         // canonical header key
	trusted   []netip.Prefix // masked, IPv4-mapped prefixes unmapped
	recursive bool
	// collectors pools the *reqview.Collector values that gather a header's
	// lines (a client or a proxy chain may send several).
	collectors sync.Pool
}

// New validates cfg and builds its Resolver. cfg.Header is matched
// case-insensitively; "" means X-Forwarded-For (the default). It returns an
// error for any other header name or an invalid trusted prefix.
func New(cfg config.RealIP) (*Resolver, error) {
	r := &Resolver{recursive: cfg.Recursive}
	r.collectors.New = func() any { return reqview.NewCollector() }
	switch {
	case cfg.Header == "" || strings.EqualFold(cfg.Header, xffKey):
		r.kind, r.key = kindXFF, xffKey
	case strings.EqualFold(cfg.Header, "X-Real-IP"):
		r.kind, r.key = kindXRealIP, textproto.CanonicalMIMEHeaderKey("X-Real-IP")
	case strings.EqualFold(cfg.Header, "Forwarded"):
		r.kind, r.key = kindForwarded, "Forwarded"
	default:
		return nil, fmt.Errorf("real_ip header %q: want X-Forwarded-For, X-Real-IP or Forwarded", cfg.Header)
	}
	r.trusted = make([]netip.Prefix, 0, len(cfg.TrustedProxies))
	for _, p := range cfg.TrustedProxies {
		if !p.IsValid() {
			return nil, fmt.Errorf("real_ip trusted proxy %v: invalid prefix", p)
		}
		p = p.Masked()
		// ::ffff:10.0.0.0/104 is 10.0.0.0/8: addresses are unmapped before
		// matching, so the prefix must be too.
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		r.trusted = append(r.trusted, p)
	}
	return r, nil
}

// ClientIP returns the client address of a request whose TCP peer is peer and
// whose headers are h, by the walk in the package doc. The result is unmapped
// and zone-less: the peer itself, or an address that appears in the header.
// peer must be valid (an invalid peer is returned as is, never trusted).
func (r *Resolver) ClientIP(peer netip.Addr, h reqview.Headers) netip.Addr {
	peer = normalize(peer)
	if !r.isTrusted(peer) {
		return peer // the common case for direct clients: no header read
	}
	if r.kind == kindXRealIP {
		line, ok := h.Get(r.key)
		if !ok {
			return peer
		}
		c := listCursor{lines: []string{line}, done: true}
		return r.walk(peer, c.next)
	}
	col := r.collectors.Get().(*reqview.Collector)
	defer r.put(col)
	lines := col.Values(h, r.key)
	if len(lines) == 0 {
		return peer
	}
	switch r.kind {
	case kindForwarded:
		var c forwardedCursor
		c.parse(lines)
		return r.walk(peer, c.next)
	default:
		c := listCursor{lines: lines, done: true}
		return r.walk(peer, c.next)
	}
}

// ForwardedFor returns the X-Forwarded-For value to send upstream
// (docs/CONTRACT.md): from a trusted peer its X-Forwarded-For lines joined by ", "
// with the peer appended; from an untrusted peer the peer alone, since an
// untrusted client's own header is a claim nobody vouches for. It reads
// X-Forwarded-For whatever header the Resolver walks. One allocation.
//
// The caller must set the result on the outgoing request itself (with
// httputil.ReverseProxy, in Rewrite), or ReverseProxy appends the peer to the
// client's header on its own.
func (r *Resolver) ForwardedFor(peer netip.Addr, h reqview.Headers) string {
	var buf [128]byte
	return string(r.AppendForwardedFor(buf[:0], peer, h))
}

// AppendForwardedFor appends ForwardedFor's value to dst (no allocation
// when dst has room).
func (r *Resolver) AppendForwardedFor(dst []byte, peer netip.Addr, h reqview.Headers) []byte {
	peer = normalize(peer)
	if r.isTrusted(peer) {
		col := r.collectors.Get().(*reqview.Collector)
		defer r.put(col)
		for _, l := range col.Values(h, xffKey) {
			if l = strings.Trim(l, " \t,"); l != "" {
				dst = append(dst, l...)
				dst = append(dst, ", "...)
			}
		}
	}
	return peer.AppendTo(dst)
}

// put returns c to the pool, holding no request's strings.
func (r *Resolver) put(c *reqview.Collector) {
	c.Release()
	r.collectors.Put(c)
}

// Trusted reports whether a is in TrustedProxies (after unmapping it and
// dropping its zone, as every address is): whether a peer's forwarding
// headers are believed.
func (r *Resolver) Trusted(a netip.Addr) bool { return r.isTrusted(normalize(a)) }

// isTrusted reports whether a (normalized) address is in TrustedProxies.
func (r *Resolver) isTrusted(a netip.Addr) bool {
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// normalize unmaps an address and drops its zone, so that every spelling of
// one address matches and prints the same.
func normalize(a netip.Addr) netip.Addr {
	return a.Unmap().WithZone("")
}

// hopState is the outcome of taking the next hop from the right.
type hopState uint8

const (
	hopEnd hopState = iota // no hops left
	hopBad                 // the hop does not parse: the walk stops
	hopOK
)

// walk is ngx_http_get_forwarded_addr_internal unrolled (see the package
// doc); next yields the header's hops from the right. The peer must be
// trusted already. next is a func, not an interface, so that the cursor
// stays on the caller's stack.
func (r *Resolver) walk(peer netip.Addr, next func() (netip.Addr, hopState)) netip.Addr {
	cur := peer
	for {
		a, st := next()
		if st != hopOK {
			return cur
		}
		cur = normalize(a)
		if !r.recursive || !r.isTrusted(cur) {
			return cur
		}
	}
}

// listCursor walks X-Forwarded-For and X-Real-IP lines right to left, last
// line first, as ngx_http_get_forwarded_addr_internal scans one line, and
// without allocating: the walk usually stops after one or two hops, so the
// rest of a long header is never scanned.
type listCursor struct {
	lines []string // lines not yet started
	rest  string   // unconsumed part of the current line
	done  bool     // the current line is consumed (or none is started)
}

func (c *listCursor) next() (netip.Addr, hopState) {
	if c.done {
		if len(c.lines) == 0 {
			return netip.Addr{}, hopEnd
		}
		c.rest, c.lines = c.lines[len(c.lines)-1], c.lines[:len(c.lines)-1]
		c.done = false
	}
	if c.rest == "" {
		return netip.Addr{}, hopBad // an empty line: nginx fails to parse it
	}
	// Like nginx, the first byte of the line is never taken for a
	// separator: a line that starts with "," ends in a hop that fails.
	end := len(c.rest) - 1
	for end > 0 && isSep(c.rest[end]) {
		end--
	}
	start := end
	for start > 0 && !isSep(c.rest[start]) {
		start--
	}
	var tok string
	if start > 0 {
		tok, c.rest = c.rest[start+1:end+1], c.rest[:start]
	} else {
		tok, c.done = c.rest[:end+1], true
	}
	if a, ok := parseAddrPort(tok); ok {
		return a, hopOK
	}
	return netip.Addr{}, hopBad
}

// isSep reports whether c separates X-Forwarded-For entries: nginx splits
// on spaces and commas only.
func isSep(c byte) bool { return c == ' ' || c == ',' }

// parseAddrPort parses an address, "IPv4:port" or "[IPv6]:port", as nginx's
// ngx_parse_addr_port does: the port must be 1..65535 and a bracketed address
// must carry one.
func parseAddrPort(s string) (netip.Addr, bool) {
	if a, ok := parseAddr(s); ok {
		return a, true
	}
	var host, port string
	if strings.HasPrefix(s, "[") {
		i := strings.IndexByte(s, ']')
		if i < 0 || i+1 >= len(s) || s[i+1] != ':' {
			return netip.Addr{}, false
		}
		host, port = s[1:i], s[i+2:]
	} else {
		var found bool
		if host, port, found = strings.Cut(s, ":"); !found {
			return netip.Addr{}, false
		}
	}
	if !validPort(port) {
		return netip.Addr{}, false
	}
	return parseAddr(host)
}

// parseAddr parses a bare IPv4 or IPv6 address without a zone.
func parseAddr(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a, true
}

// validPort reports whether s is a decimal port 1..65535 (leading zeros
// allowed, as ngx_atoi allows them).
func validPort(s string) bool {
	if s == "" {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
		if n = n*10 + int(s[i]-'0'); n > 65535 {
			return false
		}
	}
	return n >= 1
}
