package realip

import (
	"net/netip"
	"strings"
)

// forwardedCursor holds the hops of Forwarded header lines (RFC 7239),
// parsed left to right into a ring of the last maxForwardedHops elements and
// then yielded right to left.
type forwardedCursor struct {
	ring  [maxForwardedHops]hop
	n     int // elements parsed in all (may exceed the ring)
	taken int // elements yielded so far, from the right
}

// hop is one Forwarded element's for= node; ok is false when it is missing,
// unknown, obfuscated or malformed.
type hop struct {
	addr netip.Addr
	ok   bool
}

// parse reads every line, in order, as one list of elements.
func (c *forwardedCursor) parse(lines []string) {
	for _, s := range lines {
		for s != "" {
			var h hop
			var empty bool
			h, empty, s = parseElement(s)
			if !empty {
				c.ring[c.n%maxForwardedHops] = h
				c.n++
			}
		}
	}
}

func (c *forwardedCursor) next() (netip.Addr, hopState) {
	switch {
	case c.taken == c.n:
		return netip.Addr{}, hopEnd
	case c.taken == maxForwardedHops:
		return netip.Addr{}, hopBad // beyond the ring: stop, as for a bad hop
	}
	c.taken++
	h := c.ring[(c.n-c.taken)%maxForwardedHops]
	if !h.ok {
		return netip.Addr{}, hopBad
	}
	return h.addr, hopOK
}

// parseElement parses one forwarded-element (RFC 7239 section 4) at the start
// of s: pairs `token=value` separated by ";", value a token or a
// quoted-string, up to a "," outside quotes. It returns the element's hop,
// whether the element was empty (RFC 9110 section 5.6.1 lets a list carry
// empty elements), and the rest of s after the element's comma. A syntax
// error makes the hop bad and skips, quote-aware, to the next comma.
func parseElement(s string) (h hop, empty bool, rest string) {
	empty = true
	var forVal string
	var fors int
	bad := false
	i := 0
	for {
		i = skipOWS(s, i)
		if i == len(s) || s[i] == ',' {
			break
		}
		if s[i] == ';' {
			i++
			continue
		}
		empty = false
		j := i
		for j < len(s) && isTokenChar(s[j]) {
			j++
		}
		name := s[i:j]
		if name == "" || j == len(s) || s[j] != '=' {
			bad = true
			break
		}
		val, end, ok := parseValue(s, j+1)
		if !ok {
			bad = true
			i = end
			break
		}
		if strings.EqualFold(name, "for") {
			fors++
			forVal = val
		}
		i = skipOWS(s, end)
		if i < len(s) && s[i] != ';' && s[i] != ',' {
			bad = true
			break
		}
	}
	if bad {
		i = skipToComma(s, i)
	}
	if i < len(s) { // s[i] == ','
		i++
	}
	if !bad && fors == 1 {
		h.addr, h.ok = parseNode(forVal)
	}
	return h, empty, s[i:]
}

// parseValue parses a token or quoted-string value starting at s[i]. It
// returns the value's content, the index just past it, and false on a syntax
// error (an empty value, an unterminated quote, or a backslash escape: no
// valid node contains one, so it is never unescaped). After an error, end is
// where skipToComma can resume safely.
func parseValue(s string, i int) (val string, end int, ok bool) {
	if i < len(s) && s[i] == '"' {
		escaped := false
		for j := i + 1; j < len(s); j++ {
			switch s[j] {
			case '"':
				return s[i+1 : j], j + 1, j > i+1 && !escaped
			case '\\':
				escaped = true
				j++ // an escaped quote does not end the string
			}
		}
		return "", len(s), false // unterminated: the rest of the line is in it
	}
	j := i
	// Lenient: unquoted IPv6 nodes ("[2001:db8::1]:80") are accepted too,
	// though RFC 7239 requires quotes around them.
	for j < len(s) && (isTokenChar(s[j]) || s[j] == ':' || s[j] == '[' || s[j] == ']') {
		j++
	}
	return s[i:j], j, j > i
}

// skipToComma returns the index of the next ',' at or after i outside a
// quoted string, or len(s).
func skipToComma(s string, i int) int {
	quoted := false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == ',':
			return i
		}
	}
	return len(s)
}

// parseNode parses an RFC 7239 section 6 node: IPv4address or
// "[" IPv6address "]", optionally ":" port (1*5DIGIT) or ":" obfport
// ("_" 1*(ALPHA / DIGIT / "." / "_" / "-")). "unknown" and obfuscated
// identifiers ("_hidden") say nothing usable about the client: false.
func parseNode(v string) (netip.Addr, bool) {
	var a netip.Addr
	var port string
	var ok, hasPort bool
	if strings.HasPrefix(v, "[") {
		i := strings.IndexByte(v, ']')
		if i < 0 {
			return netip.Addr{}, false
		}
		if a, ok = parseAddr(v[1:i]); !ok || !a.Is6() {
			return netip.Addr{}, false
		}
		if rest := v[i+1:]; rest != "" {
			if rest[0] != ':' {
				return netip.Addr{}, false
			}
			port, hasPort = rest[1:], true
		}
	} else {
		var host string
		host, port, hasPort = strings.Cut(v, ":")
		if a, ok = parseAddr(host); !ok || !a.Is4() {
			return netip.Addr{}, false
		}
	}
	if hasPort && !validNodePort(port) {
		return netip.Addr{}, false
	}
	return a, true
}

// validNodePort reports whether s is an RFC 7239 port: 1 to 5 digits, or an
// obfuscated port.
func validNodePort(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '_' {
		if len(s) == 1 {
			return false
		}
		for i := 1; i < len(s); i++ {
			c := s[i]
			if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
				return false
			}
		}
		return true
	}
	if len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// skipOWS skips spaces and tabs (RFC 9110 OWS) from s[i].
func skipOWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// isTokenChar reports whether c is an RFC 9110 tchar.
func isTokenChar(c byte) bool {
	return isAlnum(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
