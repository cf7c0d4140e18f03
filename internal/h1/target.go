package h1

import (
	"bytes"
	"net/netip"
)

// validTarget reports whether t is a request-target RFC 9112 §3.2 allows
// for method m: origin form ("/" path ["?" query]), absolute form with a
// non-empty authority and no userinfo, authority form (host ":" port) for
// CONNECT only, or "*" for OPTIONS only. Every byte is VCHAR or obs-text
// but "#", and every "%" of the path starts a %HH escape; the query's are
// passed as sent, as net/http and nginx pass them (a query is the
// upstream's to decode).
func validTarget(m, t []byte) bool {
	switch {
	case len(t) == 0:
		return false
	case string(m) == "CONNECT":
		return validAuthority(t, true)
	case t[0] == '/':
		return validPath(t)
	case len(t) == 1 && t[0] == '*':
		return string(m) == "OPTIONS"
	}
	return validAbsolute(t)
}

// validPath checks the bytes of a path and query.
func validPath(t []byte) bool {
	query := false
	for i := 0; i < len(t); i++ {
		c := t[i]
		if class[c]&cTarget == 0 {
			return false
		}
		query = query || c == '?'
		if c == '%' && !query {
			if i+2 >= len(t) {
				return false
			}
			if _, ok := unhex(t[i+1]); !ok {
				return false
			}
			if _, ok := unhex(t[i+2]); !ok {
				return false
			}
		}
	}
	return true
}

// validAbsolute checks scheme "://" authority [path-abempty ["?" query]].
func validAbsolute(t []byte) bool {
	i := 0
	for i < len(t) && (isAlpha(t[i]) || i > 0 && (isDigit(t[i]) || t[i] == '+' || t[i] == '-' || t[i] == '.')) {
		i++
	}
	if i == 0 || len(t) < i+3 || string(t[i:i+3]) != "://" {
		return false
	}
	t = t[i+3:]
	end := 0
	for end < len(t) && t[end] != '/' && t[end] != '?' {
		end++
	}
	if !validAuthority(t[:end], false) {
		return false
	}
	return validPath(t[end:])
}

// validAuthority checks host [":" port]: a reg-name or an IPv6 literal in
// brackets, a port of digits (required when needPort).
func validAuthority(a []byte, needPort bool) bool {
	host, port, hasPort := a, []byte(nil), false
	if len(a) > 0 && a[0] == '[' {
		end := indexByte(a, ']')
		if end < 0 {
			return false
		}
		ip, err := netip.ParseAddr(string(a[1:end]))
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return false
		}
		host, a = a[:end+1], a[end+1:]
		if len(a) > 0 {
			if a[0] != ':' {
				return false
			}
			port, hasPort = a[1:], true
		}
	} else {
		if i := indexByte(a, ':'); i >= 0 {
			host, port, hasPort = a[:i], a[i+1:], true
		}
		for _, c := range host {
			if class[c]&cHost == 0 {
				return false
			}
		}
	}
	if len(host) == 0 || needPort && (!hasPort || len(port) == 0) {
		return false
	}
	for _, c := range port {
		if !isDigit(c) {
			return false
		}
	}
	return true
}

func isAlpha(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

func indexByte(b []byte, c byte) int { return bytes.IndexByte(b, c) }
