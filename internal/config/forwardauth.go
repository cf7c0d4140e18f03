package config

import (
	"maps"
	"slices"

	"gopkg.in/yaml.v3"

	"rlproxy/internal/algo"
)

// integrations decodes the two decision interfaces, `forward_auth:` and
// `envoy_rls:`, after the routes and policies they refer to (and the
// listeners' overrides).
func (l *loader) integrations(top object) {
	if n := top.get("forward_auth"); n != nil {
		l.forwardAuth(top, l.object(n, "forward_auth", top.keys["forward_auth"].Line, forwardAuthSection().names()...))
	}
	if n := top.get("envoy_rls"); n != nil {
		l.envoyRLS(top, l.object(n, "envoy_rls", top.keys["envoy_rls"].Line, envoyRLSSection().names()...))
	}
}

// forwardAuthSection is `forward_auth:` (decoded by forwardAuth).
func forwardAuthSection() *section {
	return &section{fields: []field{
		{name: "listen", value: checked(listenShape),
			doc: "Forward-auth decision listener, HOST:PORT (nginx auth_request, Traefik ForwardAuth, Caddy forward_auth); needs real_ip.trusted_proxies; \"\" or absent: off."},
		{name: "refused_status", value: checked(func() schema { return intShape(400, 599) }),
			doc: "Status of a refusal; default response.status (nginx auth_request passes only 401 and 403: set 403 there)."},
	}}
}

// forwardAuth decodes `forward_auth:`. Its listener must differ from the
// public one: the public listener believes forwarding headers only from
// trusted proxies, and so does this one, but it must never be reachable by
// the clients it decides for.
func (l *loader) forwardAuth(top object, o object) {
	fa := &l.c.ForwardAuth
	if n := o.get("listen"); n != nil {
		if s, ok := l.str(n, o.field("listen")); ok && s != "" {
			if s, ok := l.hostPort(n, o.field("listen")); ok {
				fa.Listen = s
				l.distinctListener(n, o.field("listen"), s, "listen", l.c.Listen, "admin_listen", l.c.AdminListen)
				if len(l.c.RealIP.TrustedProxies) == 0 {
					l.errorf(n, o.field("listen"), "needs real_ip.trusted_proxies: only the proxies listed there are answered (with none, every caller gets 403)")
				}
			}
		}
	}
	if n := o.get("refused_status"); n != nil {
		if v, ok := l.integer(n, o.field("refused_status"), 400, 599); ok {
			fa.RefusedStatus = int(v)
		}
	}
	// With the proxy listener off every route is served by the decision
	// interfaces alone, which never see the response.
	if fa.Listen != "" && l.c.Listen == "" {
		for i, r := range l.c.Routes {
			if why := l.c.NeedsResponse(r); why != "" {
				field := index("routes", i) + ".policies"
				if r.CostResponseHeader != "" {
					field = index("routes", i) + ".cost_response_header"
				}
				l.errorf(&yaml.Node{Line: keyLine(top, "routes")}, field,
					"%s, but with listen: \"\" this route is served only by forward_auth, which never sees the response", why)
			}
		}

	}
}

// distinctListener reports addr (field path at n) colliding with one of
// the other listeners, given as name, address pairs ("" = off).
func (l *loader) distinctListener(n *yaml.Node, path, addr string, others ...string) {
	for i := 0; i+1 < len(others); i += 2 {
		if others[i+1] != "" && samePort(addr, others[i+1]) {
			l.errorf(n, path, "%q: must not share the %s listener %q", addr, others[i], others[i+1])
		}
	}
}

// needsResponse says why policy p cannot be served by an interface that
// never sees the response (forward_auth without the proxy, envoy_rls), or
// "" when it can. A concurrency lease is released when the response is
// done: nobody would release it, and it would hold its slot until its TTL.
// Policies that charge from the response (status or a response header)
// belong here too.
func needsResponse(p *Policy) string {
	if p == nil {
		return ""
	}
	switch {
	case p.Limit.Kind == algo.Concurrency:
		return "is a concurrency limit (its lease ends with the response)"
	case p.CountStatus != nil:
		return "counts only some response statuses (count_status)"
	}
	return ""
}

// routePolicies is every policy a request of r may be checked against: the
// route's, then those of every plan of its plan set.
func routePolicies(c *Config, r *Route) []string {
	ps := append([]string(nil), r.Policies...)
	if pl := c.Plans[r.Plan]; pl != nil {
		for _, name := range slices.Sorted(maps.Keys(pl.Plans)) {
			ps = append(ps, pl.Plans[name]...)
		}
	}
	return ps
}
