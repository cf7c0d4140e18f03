package config

import (
	"strings"

	"gopkg.in/yaml.v3"
)

// pathRewriteFields are a route's strip_prefix and rewrite, applied to
// the path after the route matched (package proxy, rewrite.go).
func (l *loader) pathRewriteFields(r *Route) []field {
	strip := value{pathShape, func(n *yaml.Node, p string) {
		if s, ok := l.forwardPath(n, p); ok && strings.IndexByte(s, '%') >= 0 {
			l.errorf(n, p, "%q: compared with the decoded path, as match.path_prefix: write the character, not its %%-escape", s)
		} else if ok {
			r.StripPrefix = s
		}
	}}
	rewrite := value{pathShape, func(n *yaml.Node, p string) {
		if s, ok := l.forwardPath(n, p); ok && strings.HasPrefix(s, "//") {
			l.errorf(n, p, "%q: must start with a single / (a request line starting with // is read as an authority by some servers)", s)
		} else if ok {
			r.Rewrite = s
		}
	}}
	return []field{
		{name: "strip_prefix", value: strip,
			doc: "Path prefix removed before forwarding (what is left gets a leading / if it lacks one); the decoded path is compared, as match.path_prefix."},
		{name: "rewrite", value: rewrite,
			doc: "Path that replaces match.path_prefix (or match.path; / without either) before forwarding, as nginx proxy_pass with a URI."},
	}
}

// forwardPath decodes a path that goes into the request line sent
// upstream: it starts with "/", and holds no query, fragment, space or
// control byte.
func (l *loader) forwardPath(n *yaml.Node, path string) (string, bool) {
	s, ok := l.str(n, path)
	if !ok {
		return "", false
	}
	if !strings.HasPrefix(s, "/") {
		l.errorf(n, path, "%q: must start with /", s)
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f || c == '?' || c == '#' {
			l.errorf(n, path, "%q: want a path alone: no query, fragment, space or control character", s)
			return "", false
		}
	}
	return s, true
}

// checkPathRewrite refuses a route's strip_prefix and rewrite together,
// a rewrite on a path_regex route (no prefix to replace: nginx refuses a
// proxy_pass URI in a regex location too), and a strip_prefix no request
// of the route can start with.
func (l *loader) checkPathRewrite(o object, r *Route) {
	m := &r.Match
	switch {
	case r.StripPrefix != "" && r.Rewrite != "":
		l.errorf(o.get("rewrite"), o.field("rewrite"), "set strip_prefix or rewrite, not both (rewrite already replaces the matched prefix)")
	case r.Rewrite != "" && m.PathRegex != nil:
		l.errorf(o.get("rewrite"), o.field("rewrite"), "a path_regex route has no prefix to replace: match with path or path_prefix, or use strip_prefix")
	case r.StripPrefix == "":
	case m.Path != "" && !strings.HasPrefix(m.Path, r.StripPrefix),
		m.Path == "" && m.PathPrefix != "" && !strings.HasPrefix(m.PathPrefix, r.StripPrefix) && !strings.HasPrefix(r.StripPrefix, m.PathPrefix):
		l.errorf(o.get("strip_prefix"), o.field("strip_prefix"), "%q: no path the route matches starts with it", r.StripPrefix)
	}
}

// RewriteCut is the prefix of the normalized path that r's strip_prefix or
// rewrite replaces: the strip_prefix, or for a rewrite match.path, else
// match.path_prefix, else "/" (nginx: the location's prefix); "" when r
// has neither.
func (r *Route) RewriteCut() string {
	switch {
	case r.StripPrefix != "":
		return r.StripPrefix
	case r.Rewrite == "":
		return ""
	case r.Match.Path != "":
		return r.Match.Path
	case r.Match.PathPrefix != "":
		return r.Match.PathPrefix
	}
	return "/"
}

// hostWildcard checks a match.host holding a wildcard: only a whole first
// label, "*.example.com", which matches every name below example.com at
// any depth and not example.com itself (nginx server_name). It returns
// false, having reported why, for every other form.
func (l *loader) hostWildcard(n *yaml.Node, path, s string) bool {
	rest, ok := strings.CutPrefix(s, "*.")
	switch {
	case strings.HasPrefix(s, "."):
		l.errorf(n, path, "%q: write \"*%s\" (names below it) and another route for %q itself", s, s, s[1:])
		return false
	case !strings.Contains(s, "*"):
		return true
	case !ok || rest == "" || strings.Contains(rest, "*") || strings.HasPrefix(rest, "."):
		l.errorf(n, path, "%q: a wildcard is only a whole first label, as \"*.example.com\" (any name below example.com); omit host to match every host", s)
		return false
	}
	return true
}
