package proxy

import (
	"strings"

	"rlproxy/internal/config"
	"rlproxy/internal/reqview"
)

// pathRewrite is a route's strip_prefix or rewrite: the path routes
// matched (package reqview's normalized one) with cut replaced by put.
// nginx proxy_pass with a URI (ngx_http_proxy_create_request) forwards
// r->uri, the normalized path, with the location's prefix replaced,
// re-escaped (NGX_ESCAPE_URI) when the client's path held a "%", and the
// query as sent; so does this. A path that needs no normalizing (no "%",
// "//" or "/.") is its own bytes, so for it the bytes after the prefix are
// the client's, byte for byte.
type pathRewrite struct {
	cut, put string
	// strip: strip_prefix, whose result always starts with "/".
	strip bool
}

// newPathRewrite returns r's path rewrite, nil when it has none (the
// request target is then forwarded as sent, at no cost).
func newPathRewrite(r *config.Route) *pathRewrite {
	if r == nil || r.StripPrefix == "" && r.Rewrite == "" {
		return nil
	}
	return &pathRewrite{cut: r.RewriteCut(), put: r.Rewrite, strip: r.StripPrefix != ""}
}

// apply returns the escaped path to forward for raw, the escaped path of
// the request target, and false when its normalized form does not start
// with cut (a route matched otherwise than by path: forwarded as sent).
func (p *pathRewrite) apply(raw string) (string, bool) {
	norm, ok := reqview.Path(raw)
	if !ok || !strings.HasPrefix(norm, p.cut) {
		return "", false
	}
	rest := norm[len(p.cut):]
	slash := p.strip && (rest == "" || rest[0] != '/')
	quoted := strings.IndexByte(raw, '%') >= 0
	var b strings.Builder
	b.Grow(len(p.put) + 1 + len(rest) + 2*escapedExtra(rest, quoted))
	b.WriteString(p.put)
	if slash {
		b.WriteByte('/')
	}
	if !quoted {
		b.WriteString(rest)
		return b.String(), true
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; uriEscaped[c] {
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// escapedExtra counts the bytes of s that escaping turns into three.
func escapedExtra(s string, quoted bool) int {
	n := 0
	for i := 0; quoted && i < len(s); i++ {
		if uriEscaped[s[i]] {
			n++
		}
	}
	return n
}

const upperHex = "0123456789ABCDEF"

// uriEscaped is nginx 1.22's NGX_ESCAPE_URI set (ngx_escape_uri): bytes
// below 0x21, space, `"`, "#", "%", "<", ">", "?", "\", "^", "`", "{",
// "|", "}", DEL and every byte above 0x7f. "/" and the other reserved
// characters stay: a decoded "%2F" is forwarded as "/", as by nginx.
var uriEscaped = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c <= ' ' || c >= 0x7f || strings.IndexByte("\"#%<>?\\^`{|}", byte(c)) >= 0
	}
	return t
}()
