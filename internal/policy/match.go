package policy

import (
	"net/http"
	"strings"

	"rlproxy/internal/reqview"
)

// Match returns the first route matching v (file order), or nil. v is the
// request as package reqview reads it: the path normalized as nginx
// normalizes it before location matching, the Host without port or
// trailing dot. Without it "//login", "/./login", "/x/../login" or
// "/%6cogin" missed a limited /login route and reached the upstream
// unlimited, though most upstreams (nginx itself, many frameworks) serve
// them as /login. The request is still forwarded as sent, as nginx's
// proxy_pass without a URI does.
func (l *Limiter) Match(v *reqview.View) *Route {
	for _, rt := range l.routes {
		if rt.matches(v) {
			return rt
		}
	}
	return nil
}

func (rt *Route) matches(v *reqview.View) bool {
	m := &rt.match
	if len(m.Methods) > 0 {
		ok := false
		for _, meth := range m.Methods {
			// A GET route covers HEAD: upstreams (Go's ServeMux, Rails,
			// Flask, Express) run the GET handler for it, and nginx's
			// limit_except GET allows HEAD too. Otherwise HEAD walked
			// around a GET limit, its status still telling the answer.
			if meth == v.Method || meth == http.MethodGet && v.Method == http.MethodHead {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if m.Host != "" && !hostMatches(v.Host, m.Host) {
		return false
	}
	p := v.Path
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
