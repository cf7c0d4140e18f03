package config

import (
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"rlproxy/internal/algo"
)

// routes decodes `routes:`: at least one, names unique, every reference
// (upstream, policies, plan) defined.
func (l *loader) routes(top object) {
	n := top.get("routes")
	items, ok := l.list(n, "routes", false)
	if ok && len(items) == 0 {
		at := n
		if at == nil {
			at = top.missing()
		}
		l.errorf(at, "routes", "required: at least one route (a request matching no route gets 404)")
	}
	seen := map[string]int{} // route name → line
	for i, it := range items {
		l.c.Routes = append(l.c.Routes, l.route(index("routes", i), it, seen))
	}
}

// route decodes one route.
func (l *loader) route(path string, n *yaml.Node, seen map[string]int) *Route {
	r := &Route{}
	l.decode(n, path, n.Line, l.routeSection(r, seen))
	return r
}

// routeSection is one route. Fields decode in table order: the plan after
// the policies (a policy in both would be charged twice), the cost after
// both (checked against their quotas).
func (l *loader) routeSection(r *Route, seen map[string]int) *section {
	var planPolicies []string // every policy any plan of r.Plan may check
	name := value{stringShape, func(n *yaml.Node, p string) {
		if s, ok := l.str(n, p); ok && s == "" {
			l.errorf(n, p, "must not be empty")
		} else if line, dup := seen[s]; ok && dup {
			l.errorf(n, p, "%q: duplicate route name (first at line %d)", s, line)
		} else if ok {
			r.Name, seen[s] = s, n.Line
			l.reservedRouteName(n, p, s)
		}
	}}
	upstream := value{stringShape, func(n *yaml.Node, p string) {
		if s, ok := l.str(n, p); ok && l.ref(n, p, "upstream", s, slices.Sorted(maps.Keys(l.c.Upstreams))) {
			r.Upstream = s
		}
	}}
	policies := value{func() schema { return listShape(stringShape(), false) }, func(n *yaml.Node, p string) {
		r.Policies, _ = l.policyList(n, p)
	}}
	plan := value{stringShape, func(n *yaml.Node, p string) { planPolicies = l.routePlan(n, p, r) }}
	cost := value{func() schema { return intShape(1, algo.MaxCount) }, func(n *yaml.Node, p string) {
		if c, ok := l.integer(n, p, 1, algo.MaxCount); ok {
			r.Cost = c
			l.checkCost(n, p, c, slices.Concat(r.Policies, planPolicies))
		}
	}}
	upgrades := value{func() schema { return listShape(protocolShape(), false) }, func(n *yaml.Node, p string) {
		r.Upgrades = l.upgrades(n, p)
	}}
	return &section{fields: append([]field{
		{name: "name", need: "required: names the route in metrics and logs", value: name,
			doc: "Names the route in metrics and logs; unique; \"" + ReservedRouteName + "\" is reserved."},
		{name: "match", sub: l.matchSection(&r.Match), doc: "Which requests the route takes; every field set must match; empty matches every request."},
		{name: "upstream", need: "required: one of upstreams", needed: func() bool { return l.c.Listen != "" }, value: upstream,
			doc: "Name of the upstream requests go to; not needed without a public listener (listen: \"\")."},
		{name: "policies", value: policies, doc: "Names of the policies checked, all of them: a refused request is charged by none."},
		{name: "plan", value: plan, doc: "Name of a plans entry: the credential's plan adds its policies."},
		{name: "cost", def: "1", value: cost, doc: "Requests charged per request, at most every policy's quota."},
		{name: "cost_response_header", value: checked(headerNameShape),
			doc: "Response header whose integer value is the request's cost, settled after the response (for example X-Tokens-Used); absent: cost."},
		{name: "upgrades", def: "[websocket]", value: upgrades,
			doc: "Protocols a request may upgrade to (Upgrade header), any case: a name (any version) or name/version, e.g. websocket, tcp, SPDY/3.1; any other Upgrade, h2c included, is dropped; []: none."},
		{name: "max_body_size", value: l.byteSizeVal(&r.MaxBodySize),
			doc: "Largest request body, bytes or 1MiB-style (nginx client_max_body_size): 413 before a larger one reaches the upstream; 0 = no limit; absent: server.max_body_size."},
		{name: "limit_rate", def: "0", value: l.byteSizeVal(&r.LimitRate),
			doc: "Each response's body at most this many bytes per second, after limit_rate_after (nginx limit_rate); 0 = no cap."},
		{name: "limit_rate_after", def: "0", value: l.byteSizeVal(&r.LimitRateAfter),
			doc: "Bytes of each response sent at full speed before limit_rate applies (nginx limit_rate_after)."},
		{name: "priority", value: value{stringShape, func(n *yaml.Node, p string) { r.Priority, _ = l.priorityRef(n, p) }},
			doc: "Priority class (server.priority_classes) of the route's requests at an upstream with adaptive_concurrency; absent: the lowest."},
	}, l.pathRewriteFields(r)...), check: func(o object) {
		if !o.has("max_body_size") {
			r.MaxBodySize = l.c.Server.MaxBodySize
		}
		if !o.bad {
			l.costHeader(o, r)
			l.checkPathRewrite(o, r)
		}
	}, extend: func(s schema) { s["not"] = schema{"required": []any{"strip_prefix", "rewrite"}} }}
}

// protocolShape is an Upgrade protocol: a token, optionally "/" and a
// version token (RFC 9110 §7.8).
func protocolShape() schema {
	const token = "[!#$%&'*+.^_`|~0-9A-Za-z-]+"
	return schema{"type": "string", "pattern": "^" + token + "(/" + token + ")?$"}
}

// upgrades decodes a route's upgrades: protocols, none twice, lower-cased
// (protocol names compare case-insensitively).
func (l *loader) upgrades(n *yaml.Node, path string) []string {
	items, protos, ok := l.strings(n, path, false)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(protos))
	for i, s := range protos {
		name, version, versioned := strings.Cut(s, "/")
		s = strings.ToLower(s)
		switch {
		case !isToken(name) || versioned && !isToken(version):
			l.errorf(items[i], index(path, i), "%q: want a protocol such as websocket, tcp or SPDY/3.1 (RFC 9110 §7.8)", protos[i])
		case strings.EqualFold(name, "h2c"):
			l.errorf(items[i], index(path, i), "%q: rlproxy never forwards an upgrade to HTTP/2 (clients reach it by HTTP/2 itself)", protos[i])
		case slices.Contains(out, s):
			l.errorf(items[i], index(path, i), "%q: listed twice", protos[i])
		default:
			out = append(out, s)
		}
	}
	return out
}

// routePlan decodes a route's plan and returns every policy its plans may
// check.
func (l *loader) routePlan(n *yaml.Node, path string, r *Route) []string {
	s, ok := l.str(n, path)
	if !ok || !l.ref(n, path, "plan", s, slices.Sorted(maps.Keys(l.c.Plans))) {
		return nil
	}
	r.Plan = s
	var planPolicies []string
	for _, name := range slices.Sorted(maps.Keys(l.c.Plans[s].Plans)) {
		planPolicies = append(planPolicies, l.c.Plans[s].Plans[name]...)
	}
	for _, p := range r.Policies {
		if slices.Contains(planPolicies, p) {
			l.errorf(n, path, "plan %q also checks policy %q, which the route lists: it would be charged twice", s, p)
		}
	}
	return planPolicies
}

// checkCost refuses a cost larger than a policy's quota (q: requests
// accepted at an instant from idle): such a request could never pass.
func (l *loader) checkCost(n *yaml.Node, path string, cost int64, policies []string) {
	for _, name := range policies {
		p := l.c.Policies[name]
		if p == nil || p.Limit.Kind == 0 {
			continue // unknown or invalid: reported already
		}
		if lim := p.Limit; cost > lim.Quota() {
			l.errorf(n, path, "%d exceeds policy %q, which accepts at most %d requests at once: the route could never pass", cost, name, lim.Quota())
		}
	}
}

// policyList decodes a list of policy names: each defined, none twice.
func (l *loader) policyList(n *yaml.Node, path string) ([]string, bool) {
	items, names, ok := l.strings(n, path, false)
	if !ok {
		return nil, false
	}
	defined := slices.Sorted(maps.Keys(l.c.Policies))
	for i, s := range names {
		switch {
		case slices.Contains(names[:i], s):
			l.errorf(items[i], index(path, i), "%q: listed twice", s)
			ok = false
		case !l.ref(items[i], index(path, i), "policy", s, defined):
			ok = false
		}
	}
	return names, ok
}

// ref checks that name is one of defined, reporting "unknown KIND" with a
// suggestion or the defined names otherwise.
func (l *loader) ref(n *yaml.Node, path, kind, name string, defined []string) bool {
	if slices.Contains(defined, name) {
		return true
	}
	hint := didYouMean(name, defined)
	switch {
	case hint != "":
	case len(defined) == 0:
		hint = "; none is defined"
	default:
		hint = fmt.Sprintf("; defined: %s", strings.Join(defined, ", "))
	}
	l.errorf(n, path, "unknown %s %q%s", kind, name, hint)
	return false
}

// matchSection is a route's `match:`; an empty match matches every request.
func (l *loader) matchSection(m *Match) *section {
	host := value{stringShape, func(n *yaml.Node, path string) {
		s, ok := l.str(n, path)
		if _, _, err := net.SplitHostPort(s); ok && err == nil {
			l.errorf(n, path, "%q: want a host name without port (the request's port is ignored)", s)
		} else if ok && l.hostWildcard(n, path, s) {
			m.Host = strings.TrimSuffix(strings.ToLower(s), ".") // as requests: api.test. is api.test
		}
	}}
	urlPath := func(dst *string) value {
		return value{pathShape, func(n *yaml.Node, path string) {
			if s, ok := l.str(n, path); ok && !strings.HasPrefix(s, "/") {
				l.errorf(n, path, "%q: must start with /", s)
			} else if ok {
				*dst = s
			}
		}}
	}
	regex := value{stringShape, func(n *yaml.Node, path string) {
		if s, ok := l.str(n, path); ok {
			re, err := regexp.Compile(s)
			if err != nil {
				l.errorf(n, path, "%q: %v", s, err)
			}
			m.PathRegex = re
		}
	}}
	return &section{fields: []field{
		{name: "host", value: host, doc: "Host, exact and case-insensitive, without port (the request's port is ignored); \"*.example.com\" matches every name below example.com."},
		{name: "path", value: urlPath(&m.Path), doc: "Path, exact."},
		{name: "path_prefix", value: urlPath(&m.PathPrefix), doc: "Path prefix."},
		{name: "path_regex", value: regex, doc: "Go (RE2) regular expression the path must match."},
		{name: "methods", value: value{func() schema { return listShape(stringShape(), true) }, func(n *yaml.Node, path string) { l.methods(n, path, m) }},
			doc: "HTTP methods, any case; empty: any."},
	}}
}

// knownMethods are the methods of RFC 9110 §9 and PATCH (RFC 5789). Another
// token is a valid method (WebDAV's PROPFIND) but more often a typo, so it
// is matched with a warning.
func knownMethods() []string {
	return []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}
}

// methods decodes a match's methods: tokens, none twice; one outside
// knownMethods is a warning.
func (l *loader) methods(n *yaml.Node, path string, m *Match) {
	items, methods, ok := l.strings(n, path, true)
	for i, s := range methods {
		s = strings.ToUpper(s)
		switch {
		case !isToken(s):
			l.errorf(items[i], index(path, i), "%q: want an HTTP method such as GET or POST", methods[i])
			ok = false
		case slices.Contains(m.Methods, s):
			l.errorf(items[i], index(path, i), "%q: listed twice", methods[i])
			ok = false
		case !slices.Contains(knownMethods(), s):
			l.warnf(items[i], index(path, i), "%q is not a method of RFC 9110 or RFC 5789 (PATCH): matched as written%s", methods[i], didYouMean(s, knownMethods()))
		}
		m.Methods = append(m.Methods, s)
	}
	if !ok {
		m.Methods = nil
	}
}

// plans decodes one entry of `plans:`.
func (l *loader) plans(e entry) *Plans {
	p := &Plans{Name: e.name, Key: defaultKey(), Keys: &Credentials{}, Plans: map[string][]string{}}
	l.decode(e.val, join("plans", e.name), e.key.Line, l.plansSection(p, e.key.Line))
	return p
}

// plansSection is one entry of `plans:` defined at line. Fields decode in
// table order: the plans before the default and the credentials that name
// them.
func (l *loader) plansSection(p *Plans, line int) *section {
	var names []string          // the plans defined
	seen := map[string]string{} // credential → "FILE:LINE" of its first mention
	const needPlans = "required: plan name → list of policies"
	key := value{func() schema { return listShape(stringShape(), true) }, func(n *yaml.Node, path string) {
		if srcs, ok := l.sources(n, path, false); ok {
			p.Key.Sources = srcs
		}
	}}
	plans := value{func() schema { return namedShape(listShape(stringShape(), false), "") }, func(n *yaml.Node, path string) {
		for _, pe := range l.entries(n, path) {
			names = append(names, pe.name)
			p.Plans[pe.name], _ = l.policyList(pe.val, join(path, pe.name))
		}
		if len(names) == 0 {
			l.errorf(&yaml.Node{Line: line}, path, needPlans)
		}
	}}
	def := value{stringShape, func(n *yaml.Node, path string) {
		if s, ok := l.str(n, path); ok && l.ref(n, path, "plan", s, names) {
			p.Default = s
		}
	}}
	var block *flatBlock // the inline keys, when read outside the YAML
	keys := value{func() schema { return namedShape(stringShape(), "") }, func(n *yaml.Node, path string) {
		if block = l.inlineBlock(n); block != nil {
			block.field = path
			flatAdd(l.decoder, block.flatText, block.count, p, names, seen)
			return
		}
		credentials(l.decoder, n, path, p, names, seen)
	}}
	keysFile := value{stringShape, func(n *yaml.Node, path string) {
		if f, ok := l.filePath(n, path, l.dir); ok {
			if block != nil { // a keys_file's credentials must not repeat them
				block.addSeen(l.file, seen)
			}
			l.keysFile(n, path, f, p, names, seen)
		}
	}}
	return &section{fields: []field{
		{name: "key", need: "required: where the credential comes from, e.g. header:X-API-Key", value: key,
			doc: "Where the credential comes from, e.g. header:X-API-Key (key sources as a policy's)."},
		{name: "plans", need: needPlans, value: plans, doc: "Plan name → the policies it checks."},
		{name: "default", need: "required: the plan of unknown or missing credentials", value: def,
			doc: "The plan of unknown or missing credentials."},
		{name: "keys", value: keys, doc: "Credential → plan name, inline."},
		{name: "keys_file", value: keysFile, doc: "YAML file of credential: plan lines (relative to this file), merged with keys; reloaded with the config."},
		{name: "priority", value: value{func() schema { return namedShape(stringShape(), "") }, func(n *yaml.Node, path string) {
			p.Priority = l.planPriorities(n, path, names)
		}}, doc: "Plan name → priority class (server.priority_classes) of its requests at an upstream with adaptive_concurrency; over the route's priority."},
	}}
}

// credentials adds a mapping credential → plan name (inline `keys:` or a
// keys_file) to p.Keys. Messages never repeat a credential: they are
// secrets, and the line number is enough to find one.
func credentials(d *decoder, n *yaml.Node, path string, p *Plans, plans []string, seen map[string]string) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want a mapping of credential: plan, not %s", describe(n))
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			d.errorf(k, path, "want a non-empty credential")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.errorf(k, path, "credential listed twice (first at %s)", first)
			continue
		}
		seen[k.Value] = fmt.Sprintf("%s:%d", d.file, k.Line)
		plan, ok := d.str(v, path)
		if !ok {
			continue
		}
		i := slices.Index(plans, plan)
		if i < 0 {
			d.errorf(v, path, "unknown plan %q%s", plan, didYouMean(plan, plans))
			continue
		}
		p.Keys.add(k.Value, i, plans)
	}
}

// warnCredentials warns about credential-derived keys that are weaker than
// they look: hashed with the public built-in secret in a shared store, or
// JWT claims taken from unverified tokens (warned once, at the first use).
func (l *loader) warnCredentials(top object) {
	type use struct {
		field string
		line  int
		key   KeySpec
	}
	var uses []use
	for _, name := range l.c.PolicyOrder {
		uses = append(uses, use{join(join("policies", name), "key"), l.c.Policies[name].Line, l.c.Policies[name].Key})
	}
	for _, name := range slices.Sorted(maps.Keys(l.c.Plans)) {
		uses = append(uses, use{join(join("plans", name), "key"), keyLine(top, "plans"), l.c.Plans[name].Key})
	}
	credential, jwtWarned := false, false
	for _, u := range uses {
		for _, s := range u.key.Sources {
			credential = credential || (s.Kind != SourceIP && s.Kind != SourceGlobal)
			if s.Kind == SourceJWT && l.c.JWT.HMACSecret == nil && !jwtWarned {
				l.warnf(&yaml.Node{Line: u.line}, u.field, "jwt:%s is read from unverified tokens (jwt.hmac_secret_env is not set), so a client can claim any value", s.Name)
				jwtWarned = true
			}
		}
	}
	if credential && l.c.Store.Type == "valkey" && string(l.c.Store.HashSecret) == builtinHashSecret {
		l.warnf(&yaml.Node{Line: keyLine(top, "store")}, "store.key_hash_secret_env", "not set: credential-derived keys in Valkey are hashed with rlproxy's built-in (public) secret")
	}
}
