package config

import (
	"strings"
	"testing"
)

// TestRoutePathRewrite: strip_prefix and rewrite decode onto the route,
// with the prefix a rewrite replaces (RewriteCut), and every refusal names
// file:line: field.
func TestRoutePathRewrite(t *testing.T) {
	const head = "upstreams: { app: { builtin: echo } }\nroutes:\n"
	ok := []struct{ route, strip, rewrite, cut string }{
		{`{ name: r, upstream: app, match: { path_prefix: /api/ }, strip_prefix: /api }`, "/api", "", "/api"},
		{`{ name: r, upstream: app, match: { path_prefix: /api }, strip_prefix: /api/v1 }`, "/api/v1", "", "/api/v1"},
		{`{ name: r, upstream: app, match: { path_prefix: /api/ }, rewrite: /p/ }`, "", "/p/", "/api/"},
		{`{ name: r, upstream: app, match: { path: /api, path_prefix: /a }, rewrite: /p }`, "", "/p", "/api"},
		{`{ name: r, upstream: app, rewrite: /p/ }`, "", "/p/", "/"},
		{`{ name: r, upstream: app, match: { path_regex: "^/v[0-9]/" }, strip_prefix: /v1 }`, "/v1", "", "/v1"},
		{`{ name: r, upstream: app }`, "", "", ""},
	}
	for _, tt := range ok {
		cfg, err := ParseWith("x.yaml", []byte(head+"  - "+tt.route+"\n"), LoadOptions{})
		if err != nil {
			t.Errorf("%s: %v", tt.route, err)
			continue
		}
		r := cfg.Routes[0]
		if r.StripPrefix != tt.strip || r.Rewrite != tt.rewrite || r.RewriteCut() != tt.cut {
			t.Errorf("%s: strip %q rewrite %q cut %q, want %q %q %q", tt.route, r.StripPrefix, r.Rewrite, r.RewriteCut(), tt.strip, tt.rewrite, tt.cut)
		}
	}
	bad := []struct{ route, want string }{
		{`{ name: r, upstream: app, strip_prefix: api }`, `x.yaml:3: routes[0].strip_prefix: "api": must start with /`},
		{`{ name: r, upstream: app, rewrite: "p/" }`, `x.yaml:3: routes[0].rewrite: "p/": must start with /`},
		{`{ name: r, upstream: app, rewrite: "//p/" }`, `x.yaml:3: routes[0].rewrite: "//p/": must start with a single /`},
		{`{ name: r, upstream: app, rewrite: "/p?x=1" }`, `x.yaml:3: routes[0].rewrite: "/p?x=1": want a path alone: no query, fragment, space or control character`},
		{`{ name: r, upstream: app, strip_prefix: "/a b" }`, `x.yaml:3: routes[0].strip_prefix: "/a b": want a path alone`},
		{`{ name: r, upstream: app, strip_prefix: "/a%2Fb" }`, `x.yaml:3: routes[0].strip_prefix: "/a%2Fb": compared with the decoded path`},
		{`{ name: r, upstream: app, strip_prefix: /api, rewrite: /p }`, `x.yaml:3: routes[0].rewrite: set strip_prefix or rewrite, not both`},
		{`{ name: r, upstream: app, match: { path_regex: "^/a" }, rewrite: /p }`, `x.yaml:3: routes[0].rewrite: a path_regex route has no prefix to replace`},
		{`{ name: r, upstream: app, match: { path_prefix: /api }, strip_prefix: /v1 }`, `x.yaml:3: routes[0].strip_prefix: "/v1": no path the route matches starts with it`},
		{`{ name: r, upstream: app, match: { path: /api/x }, strip_prefix: /api/y }`, `x.yaml:3: routes[0].strip_prefix: "/api/y": no path the route matches starts with it`},
	}
	for _, tt := range bad {
		_, err := ParseWith("x.yaml", []byte(head+"  - "+tt.route+"\n"), LoadOptions{})
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s:\n got %v\nwant %s", tt.route, err, tt.want)
		}
	}
}

// TestMatchHostWildcard: "*.example.com" is kept (lower case, trailing dot
// dropped); every other wildcard form is refused with the one accepted.
func TestMatchHostWildcard(t *testing.T) {
	const head = "upstreams: { app: { builtin: echo } }\nroutes:\n  - { name: r, upstream: app, match: { host: "
	for in, want := range map[string]string{`"*.Example.COM."`: "*.example.com", `"*.com"`: "*.com", `api.test`: "api.test"} {
		cfg, err := ParseWith("x.yaml", []byte(head+in+" } }\n"), LoadOptions{})
		if err != nil || cfg.Routes[0].Match.Host != want {
			t.Errorf("host %s: %v, %v; want %q", in, cfg, err, want)
		}
	}
	const only = `a wildcard is only a whole first label, as "*.example.com" (any name below example.com); omit host to match every host`
	for in, want := range map[string]string{
		`"*"`:               `x.yaml:3: routes[0].match.host: "*": ` + only,
		`"*example.com"`:    `x.yaml:3: routes[0].match.host: "*example.com": ` + only,
		`"www.*.com"`:       `x.yaml:3: routes[0].match.host: "www.*.com": ` + only,
		`"www.example.*"`:   `x.yaml:3: routes[0].match.host: "www.example.*": ` + only,
		`"*.*.example.com"`: `x.yaml:3: routes[0].match.host: "*.*.example.com": ` + only,
		`"*."`:              `x.yaml:3: routes[0].match.host: "*.": ` + only,
		`".example.com"`:    `x.yaml:3: routes[0].match.host: ".example.com": write "*.example.com" (names below it) and another route for "example.com" itself`,
	} {
		_, err := ParseWith("x.yaml", []byte(head+in+" } }\n"), LoadOptions{})
		if err == nil || err.Error() != want {
			t.Errorf("host %s:\n got %v\nwant %s", in, err, want)
		}
	}
}
