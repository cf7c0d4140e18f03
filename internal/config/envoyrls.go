package config

import (
	"maps"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// envoyRLS decodes `envoy_rls:`: the listener and the mappings from a
// domain and descriptor shape to policies.
func (l *loader) envoyRLS(top object, o object) {
	e := &l.c.EnvoyRLS
	if n := o.get("listen"); n != nil {
		if s, ok := l.str(n, o.field("listen")); ok && s != "" {
			if s, ok := l.hostPort(n, o.field("listen")); ok {
				e.Listen = s
				l.distinctListener(n, o.field("listen"), s, "listen", l.c.Listen, "admin_listen", l.c.AdminListen,
					"forward_auth", l.c.ForwardAuth.Listen)
			}
		}
	}
	items, ok := l.list(o.get("mappings"), o.field("mappings"), false)
	if ok && len(items) == 0 && e.Listen != "" {
		l.errorf(o.missing(), o.field("mappings"), "required: at least one mapping from a domain and descriptor to policies")
	}
	routes := map[string]bool{}
	for _, r := range l.c.Routes {
		routes[r.Name] = true
	}
	seen := map[string]int{}      // mapping name → line
	shapes := map[string]string{} // domain + shape → mapping name
	for i, it := range items {
		m := l.rlsMapping(index(o.field("mappings"), i), it, seen, routes)
		if m == nil {
			continue
		}
		if first, dup := shapes[rlsShape(m)]; dup {
			l.errorf(it, index(o.field("mappings"), i), "never used: mapping %q before it matches the same descriptors", first)
			continue
		}
		shapes[rlsShape(m)] = m.Name
		e.Mappings = append(e.Mappings, m)
	}
}

// envoyRLSSection is `envoy_rls:` (decoded by envoyRLS).
func envoyRLSSection() *section {
	return &section{fields: []field{
		{name: "listen", value: checked(listenShape), doc: "gRPC listener of the Envoy rate limit service (envoy.service.ratelimit.v3), HOST:PORT; \"\" or absent: off."},
		{name: "mappings", value: checked(func() schema { return listShape(objectShape(rlsMappingSection()), false) }),
			doc: "From a domain and descriptor shape to the policies that decide it; the first that matches; required with listen."},
	}}
}

// rlsMappingSection is one of `envoy_rls.mappings:` (decoded by rlsMapping).
func rlsMappingSection() *section {
	return &section{fields: []field{
		{name: "name", need: "required", value: checked(func() schema { return schema{"type": "string", "minLength": 1} }),
			doc: "Names the mapping in metrics (route label) and logs; unique, and no route's name."},
		{name: "domain", need: "required", value: checked(func() schema { return schema{"type": "string", "minLength": 1} }), doc: "The RateLimitRequest domain."},
		{name: "descriptor", need: "required", value: checked(func() schema {
			return schema{"type": "array", "minItems": 1, "items": objectShape(rlsEntrySection())}
		}), doc: "The descriptor entries matched, in order."},
		{name: "policies", need: "required", value: checked(func() schema { return listShape(stringShape(), true) }),
			doc: "Policies deciding the descriptor (none that needs the response)."},
	}}
}

// rlsEntrySection is one entry of a mapping's `descriptor:`.
func rlsEntrySection() *section {
	return &section{fields: []field{
		{name: "key", need: "required", value: checked(func() schema { return schema{"type": "string", "minLength": 1} }), doc: "The descriptor entry's key."},
		{name: "value", value: checked(stringShape), doc: "Its value; absent: any value, which is part of the client's key."},
	}}
}

// rlsShape identifies the descriptors a mapping matches.
func rlsShape(m *RLSMapping) string {
	var b strings.Builder
	b.WriteString(m.Domain)
	for _, en := range m.Entries {
		b.WriteString("\x00" + en.Key + "\x00")
		if en.HasValue {
			b.WriteString("=" + en.Value)
		}
	}
	return b.String()
}

// rlsMapping decodes one mapping; nil when it is not usable (reported).
func (l *loader) rlsMapping(path string, n *yaml.Node, seen map[string]int, routes map[string]bool) *RLSMapping {
	o := l.object(n, path, n.Line, rlsMappingSection().names()...)
	if o.bad {
		return nil
	}
	m := &RLSMapping{}
	ok := true
	if n := o.get("name"); n == nil {
		l.errorf(o.missing(), o.field("name"), "required: names the mapping in metrics (route) and logs")
		ok = false
	} else if s, good := l.str(n, o.field("name")); !good || s == "" {
		if good {
			l.errorf(n, o.field("name"), "must not be empty")
		}
		ok = false
	} else if line, dup := seen[s]; dup {
		l.errorf(n, o.field("name"), "%q: duplicate mapping name (first at line %d)", s, line)
		ok = false
	} else if routes[s] {
		l.errorf(n, o.field("name"), "%q: a route has this name; metrics label both by it", s)
		ok = false
	} else {
		m.Name, seen[s] = s, n.Line
	}
	if n := o.get("domain"); n == nil {
		l.errorf(o.missing(), o.field("domain"), "required: the RateLimitRequest domain (Envoy's rate limit filter domain)")
		ok = false
	} else if s, good := l.str(n, o.field("domain")); !good || s == "" {
		if good {
			l.errorf(n, o.field("domain"), "must not be empty")
		}
		ok = false
	} else {
		m.Domain = s
	}
	ok = l.rlsEntries(o, m) && ok
	ok = l.rlsPolicies(o, m) && ok
	if !ok {
		return nil
	}
	return m
}

// rlsEntries decodes a mapping's `descriptor:`, a list of {key, value?}.
func (l *loader) rlsEntries(o object, m *RLSMapping) bool {
	n := o.get("descriptor")
	if n == nil {
		l.errorf(o.missing(), o.field("descriptor"), "required: the descriptor entries, e.g. [{key: remote_address}]")
		return false
	}
	items, ok := l.list(n, o.field("descriptor"), false)
	if ok && len(items) == 0 {
		l.errorf(n, o.field("descriptor"), "required: at least one entry")
		return false
	}
	for i, it := range items {
		path := index(o.field("descriptor"), i)
		eo := l.object(it, path, it.Line, rlsEntrySection().names()...)
		if eo.bad {
			ok = false
			continue
		}
		var en RLSEntry
		if kn := eo.get("key"); kn == nil {
			l.errorf(eo.missing(), eo.field("key"), "required: the descriptor entry's key")
			ok = false
		} else if s, good := l.str(kn, eo.field("key")); !good || s == "" {
			if good {
				l.errorf(kn, eo.field("key"), "must not be empty")
			}
			ok = false
		} else {
			en.Key = s
		}
		if vn := eo.get("value"); vn != nil {
			s, good := l.str(vn, eo.field("value"))
			ok = ok && good
			en.Value, en.HasValue = s, true
		}
		m.Entries = append(m.Entries, en)
	}
	return ok
}

// rlsPolicies decodes a mapping's `policies:`: defined, and none that needs
// the response, which the rate limit service never sees.
func (l *loader) rlsPolicies(o object, m *RLSMapping) bool {
	n := o.get("policies")
	if n == nil {
		l.errorf(o.missing(), o.field("policies"), "required: the policies deciding the descriptor; defined: %s",
			strings.Join(slices.Sorted(maps.Keys(l.c.Policies)), ", "))
		return false
	}
	names, ok := l.policyList(n, o.field("policies"))
	if !ok {
		return false
	}
	if len(names) == 0 {
		l.errorf(n, o.field("policies"), "required: at least one policy")
		return false
	}
	for i, p := range names {
		if why := needsResponse(l.c.Policies[p]); why != "" {
			l.errorf(resolve(n).Content[i], index(o.field("policies"), i), "policy %q %s, and the rate limit service never sees the response", p, why)
			ok = false
		}
	}
	m.Policies = names
	return ok
}
