package config

import (
	"fmt"
	"maps"
	"net"
	"os"
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
	r := &Route{Cost: 1}
	o := l.object(n, path, n.Line, "name", "match", "upstream", "policies", "plan", "cost", "cost_response_header")
	if o.bad {
		return r
	}
	if n := o.get("name"); n == nil {
		l.errorf(o.missing(), o.field("name"), "required: names the route in metrics and logs")
	} else if s, ok := l.str(n, o.field("name")); ok && s == "" {
		l.errorf(n, o.field("name"), "must not be empty")
	} else if line, dup := seen[s]; ok && dup {
		l.errorf(n, o.field("name"), "%q: duplicate route name (first at line %d)", s, line)
	} else if ok {
		r.Name, seen[s] = s, n.Line
	}
	l.match(l.object(o.get("match"), o.field("match"), keyLine(o, "match"), "host", "path", "path_prefix", "path_regex", "methods"), &r.Match)

	if n := o.get("upstream"); n == nil {
		l.errorf(o.missing(), o.field("upstream"), "required: one of upstreams")
	} else if s, ok := l.str(n, o.field("upstream")); ok && l.ref(n, o.field("upstream"), "upstream", s, slices.Sorted(maps.Keys(l.c.Upstreams))) {
		r.Upstream = s
	}
	if n := o.get("policies"); n != nil {
		r.Policies, _ = l.policyList(n, o.field("policies"))
	}
	var planPolicies []string // every policy any plan of r.Plan may check
	if n := o.get("plan"); n != nil {
		if s, ok := l.str(n, o.field("plan")); ok && l.ref(n, o.field("plan"), "plan", s, slices.Sorted(maps.Keys(l.c.Plans))) {
			r.Plan = s
			for _, name := range slices.Sorted(maps.Keys(l.c.Plans[s].Plans)) {
				planPolicies = append(planPolicies, l.c.Plans[s].Plans[name]...)
			}
			for _, p := range r.Policies {
				if slices.Contains(planPolicies, p) {
					l.errorf(n, o.field("plan"), "plan %q also checks policy %q, which the route lists: it would be charged twice", s, p)
				}
			}
		}
	}
	if n := o.get("cost"); n != nil {
		if c, ok := l.integer(n, o.field("cost"), 1, algo.MaxCount); ok {
			r.Cost = c
			l.checkCost(n, o.field("cost"), c, slices.Concat(r.Policies, planPolicies))
		}
	}
	l.costHeader(o, r)
	return r
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

// match decodes a route's `match:`; an empty match matches every request.
func (l *loader) match(o object, m *Match) {
	if n := o.get("host"); n != nil {
		s, ok := l.str(n, o.field("host"))
		if _, _, err := net.SplitHostPort(s); ok && err == nil {
			l.errorf(n, o.field("host"), "%q: want a host name without port (the request's port is ignored)", s)
		} else if ok {
			m.Host = strings.ToLower(s)
		}
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"path", &m.Path}, {"path_prefix", &m.PathPrefix}} {
		if n := o.get(f.name); n != nil {
			if s, ok := l.str(n, o.field(f.name)); ok && !strings.HasPrefix(s, "/") {
				l.errorf(n, o.field(f.name), "%q: must start with /", s)
			} else if ok {
				*f.dst = s
			}
		}
	}
	if n := o.get("path_regex"); n != nil {
		if s, ok := l.str(n, o.field("path_regex")); ok {
			re, err := regexp.Compile(s)
			if err != nil {
				l.errorf(n, o.field("path_regex"), "%q: %v", s, err)
			}
			m.PathRegex = re
		}
	}
	if n := o.get("methods"); n != nil {
		items, methods, ok := l.strings(n, o.field("methods"), true)
		for i, s := range methods {
			s = strings.ToUpper(s)
			switch {
			case !isToken(s):
				l.errorf(items[i], index(o.field("methods"), i), "%q: want an HTTP method such as GET or POST", methods[i])
				ok = false
			case slices.Contains(m.Methods, s):
				l.errorf(items[i], index(o.field("methods"), i), "%q: listed twice", methods[i])
				ok = false
			}
			m.Methods = append(m.Methods, s)
		}
		if !ok {
			m.Methods = nil
		}
	}
}

// plans decodes one entry of `plans:`.
func (l *loader) plans(e entry) *Plans {
	path := join("plans", e.name)
	p := &Plans{Name: e.name, Key: defaultKey(), Keys: map[string]string{}, Plans: map[string][]string{}}
	o := l.object(e.val, path, e.key.Line, "key", "keys", "keys_file", "default", "plans")
	if o.bad {
		return p
	}
	if n := o.get("key"); n == nil {
		l.errorf(o.missing(), o.field("key"), "required: where the credential comes from, e.g. header:X-API-Key")
	} else if srcs, ok := l.sources(n, o.field("key"), false); ok {
		p.Key.Sources = srcs
	}
	var names []string
	for _, pe := range l.entries(o.get("plans"), o.field("plans")) {
		names = append(names, pe.name)
		p.Plans[pe.name], _ = l.policyList(pe.val, join(o.field("plans"), pe.name))
	}
	if len(names) == 0 {
		l.errorf(o.missing(), o.field("plans"), "required: plan name → list of policies")
	}
	if n := o.get("default"); n == nil {
		l.errorf(o.missing(), o.field("default"), "required: the plan of unknown or missing credentials")
	} else if s, ok := l.str(n, o.field("default")); ok && l.ref(n, o.field("default"), "plan", s, names) {
		p.Default = s
	}
	seen := map[string]string{} // credential → "FILE:LINE" of its first mention
	if n := o.get("keys"); n != nil {
		credentials(l.decoder, n, o.field("keys"), p, names, seen)
	}
	if n := o.get("keys_file"); n != nil {
		f, ok := l.filePath(n, o.field("keys_file"), l.dir)
		if !ok {
			return p
		}
		data, err := os.ReadFile(f)
		if err != nil {
			l.errorf(n, o.field("keys_file"), "%q: %v", n.Value, unwrapPathError(err))
			return p
		}
		l.hash(data)
		p.KeysFile = f
		kd := &decoder{file: f, errs: l.errs}
		if root, ok := kd.document(data); ok {
			credentials(kd, root, "", p, names, seen)
		}
	}
	return p
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
		if !slices.Contains(plans, plan) {
			d.errorf(v, path, "unknown plan %q%s", plan, didYouMean(plan, plans))
			continue
		}
		p.Keys[k.Value] = plan
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
