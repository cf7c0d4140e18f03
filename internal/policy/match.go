package policy

import (
	"net/http"
	"path"
	"strings"
)

// Match returns the first route matching r (file order), or nil. Paths are
// matched in normalized form (MatchPath), as nginx matches locations.
func (l *Limiter) Match(r *http.Request) *Route {
	p := MatchPath(r.URL.Path)
	for _, rt := range l.routes {
		if rt.matches(r, p) {
			return rt
		}
	}
	return nil
}

// MatchPath is the request path routes are matched against: "." and ".."
// segments resolved and runs of slashes merged (nginx merge_slashes and its
// URI normalization, RFC 3986 section 5.2.4), a trailing slash kept. Without
// it "//login", "/./login" or "/x/../login" missed a limited /login route
// and reached the upstream unlimited, though most upstreams (nginx itself,
// many frameworks) serve them as /login. The request is still forwarded as
// sent, as nginx's proxy_pass without a URI does. Clean paths, the usual
// case, are returned as they are, without allocating.
func MatchPath(p string) string {
	if !strings.Contains(p, "//") && !strings.Contains(p, "/.") {
		return p
	}
	c := path.Clean("/" + p)
	if c != "/" && (strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..")) {
		c += "/"
	}
	return c
}

func (rt *Route) matches(r *http.Request, p string) bool {
	m := &rt.match
	if len(m.Methods) > 0 {
		ok := false
		for _, meth := range m.Methods {
			if meth == r.Method {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if m.Host != "" && !strings.EqualFold(hostOnly(r.Host), m.Host) {
		return false
	}
	if m.Path != "" && p != m.Path {
		return false
	}
	if m.PathPrefix != "" && !strings.HasPrefix(p, m.PathPrefix) {
		return false
	}
	if m.PathRegex != nil && !m.PathRegex.MatchString(p) {
		return false
	}
	return true
}

// hostOnly strips a port from a Host header value ("example.com:8080",
// "[::1]:80"), without allocating.
func hostOnly(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}
