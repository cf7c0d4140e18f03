package clientkey

import (
	"strings"

	"rlproxy/internal/config"
	"rlproxy/internal/reqview"
)

// Doubled reports whether request v carries a credential one of e's header, query
// or cookie sources reads more than once: a header field repeated, or
// spelled with "_" for "-" (CGI, WSGI and Rack upstreams read X_Api_Key as
// X-Api-Key); a query parameter named twice, names compared unescaped and
// pairs split at "&" and at ";" (some upstreams split there); a cookie
// named twice over all Cookie lines (HTTP/2 may split them; repeated
// Cookie fields as such are fine), names compared unescaped (older PHP and
// Rack unescape them). Query and cookie names are also compared as PHP
// reads them (sameParamName): "api.key" is api_key there. The proxy refuses such a request with
// 400, as nginx refuses a repeated Authorization: keying one value while
// the upstream reads another would let a client send a fresh decoy, and
// get a fresh budget, on every request. It does not allocate unless a
// query name holds a %-escape.
func (e *Extractor) Doubled(v *reqview.View) bool {
	var c *reqview.Collector
	defer func() {
		if c != nil {
			c.Release()
			e.collectors.Put(c)
		}
	}()
	for i := range e.sources {
		s := &e.sources[i]
		if c == nil && (s.kind == config.SourceHeader || s.kind == config.SourceCookie) {
			c = e.collectors.Get().(*reqview.Collector)
		}
		var n int
		switch s.kind {
		case config.SourceHeader:
			n = headerCount(c.Fields(v.Header), s.name)
		case config.SourceQuery:
			n = queryCount(v.Query, s.name)
		case config.SourceCookie:
			n = cookieCount(c.Values(v.Header, "Cookie"), s.name)
		}
		if n > 1 {
			return true
		}
	}
	return false
}

// headerCount counts the fields named name in fields, under any spelling
// equal to it case-insensitively with "_" for "-".
func headerCount(fields []reqview.Field, name string) int {
	n := 0
	for _, f := range fields {
		if len(f.Name) == len(name) && sameHeaderName(f.Name, name) {
			n++
		}
	}
	return n
}

// sameHeaderName reports whether a and b (of one length) are one name to
// an upstream that folds case and reads "_" as "-".
func sameHeaderName(a, b string) bool {
	for i := 0; i < len(a); i++ {
		if foldName(a[i]) != foldName(b[i]) {
			return false
		}
	}
	return true
}

// foldName is c lower-cased, "_" read as "-".
func foldName(c byte) byte {
	switch {
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A'
	case c == '_':
		return '-'
	}
	return c
}

// queryCount counts the parameters named name in a raw query.
func queryCount(q, name string) int {
	n := 0
	for q != "" {
		var kv string
		if i := strings.IndexAny(q, "&;"); i >= 0 {
			kv, q = q[:i], q[i+1:]
		} else {
			kv, q = q, ""
		}
		k, _, _ := strings.Cut(kv, "=")
		if k, ok := unescapeQuery(k); ok && sameParamName(k, name) {
			n++
		}
	}
	return n
}

// cookieCount counts the cookies named name over the Cookie lines.
func cookieCount(lines []string, name string) int {
	n := 0
	for _, line := range lines {
		for line != "" {
			var part string
			part, line, _ = strings.Cut(line, ";")
			k, _, ok := strings.Cut(strings.TrimSpace(part), "=")
			if k, unescaped := unescapeQuery(k); ok && unescaped && sameParamName(k, name) {
				n++
			}
		}
	}
	return n
}

// sameParamName reports whether the query or cookie name k is name to PHP,
// which drops leading spaces of a name and reads ".", " " and "[" in it as
// "_" (PHP manual, "Variables From External Sources"): "api.key=real"
// after "api_key=decoy" is a second api_key there.
func sameParamName(k, name string) bool {
	if k == name {
		return true
	}
	k = strings.TrimLeft(k, " ")
	if len(k) != len(name) {
		return false
	}
	for i := 0; i < len(k); i++ {
		if phpName(k[i]) != phpName(name[i]) {
			return false
		}
	}
	return true
}

// phpName is c as PHP reads it in a variable name.
func phpName(c byte) byte {
	switch c {
	case '.', ' ', '[':
		return '_'
	}
	return c
}
