package config

import (
	"fmt"
	"net/textproto"
	"strconv"

	"gopkg.in/yaml.v3"

	"rlproxy/internal/algo"
)

// StatusSet is a set of HTTP status codes from 100 to 599: a policy's
// count_status. The zero value is empty.
type StatusSet struct{ bits [8]uint64 }

// Has reports whether code is in s (false for codes outside 100..599).
func (s *StatusSet) Has(code int) bool {
	i := code - 100
	return i >= 0 && i < 500 && s.bits[i/64]&(1<<(i%64)) != 0
}

func (s *StatusSet) add(code int) {
	i := code - 100
	s.bits[i/64] |= 1 << (i % 64)
}

// countStatus decodes count_status (a list of status codes, 100 to 599,
// and classes "1xx" to "5xx") into p.CountStatus. It does not apply to
// concurrency, which counts requests in flight, not outcomes.
func (d *decoder) countStatus(o object, kind algo.Kind, p *Policy) {
	n := o.get("count_status")
	if n == nil {
		return
	}
	path := o.field("count_status")
	if a := algo.Describe(kind); a.Leases {
		d.errorf(o.keys["count_status"], path, "does not apply to algorithm %s (it counts requests in flight, not their outcomes)", a.Name)
		return
	}
	items, ok := d.list(n, path, true)
	if !ok {
		return
	}
	if len(items) == 0 {
		d.errorf(n, path, "want at least one status, such as [401, 403] or [\"5xx\"]")
		return
	}
	set := &StatusSet{}
	for i, it := range items {
		if !d.statusItem(it, index(path, i), set) {
			ok = false
		}
	}
	if ok {
		p.CountStatus = set
	}
}

// statusItem adds one count_status entry to set: a code (401) or a class
// ("5xx").
func (d *decoder) statusItem(n *yaml.Node, path string, set *StatusSet) bool {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
		v, ok := d.integer(n, path, 100, 599)
		if ok {
			set.add(int(v))
		}
		return ok
	}
	s, ok := d.str(n, path)
	if !ok {
		return false
	}
	if len(s) == 3 && s[0] >= '1' && s[0] <= '5' && s[1:] == "xx" {
		base := int(s[0]-'0') * 100
		for c := base; c < base+100; c++ {
			set.add(c)
		}
		return true
	}
	if v, err := strconv.Atoi(s); err == nil && v >= 100 && v <= 599 {
		set.add(v)
		return true
	}
	d.errorf(n, path, "%q: want a status code from 100 to 599 or a class from \"1xx\" to \"5xx\"", s)
	return false
}

// costHeader decodes a route's cost_response_header: an HTTP header
// name, kept in canonical form.
func (d *decoder) costHeader(o object, r *Route) {
	n := o.get("cost_response_header")
	if n == nil {
		return
	}
	path := o.field("cost_response_header")
	s, ok := d.str(n, path)
	switch {
	case !ok:
	case !isToken(s):
		d.errorf(n, path, "%q: want a header name (an HTTP token, RFC 9110 section 5.6.2), such as X-Tokens-Used", s)
	default:
		r.CostResponseHeader = textproto.CanonicalMIMEHeaderKey(s)
	}
}

// NeedsResponse names the first feature of route r that settles only once
// the upstream's response is known — its cost_response_header, a policy's
// count_status, or a concurrency policy (whose lease ends with the
// response) — among the route's policies and those of its plans; "" when
// there is none. An
// interface that answers a rate-limit question without ever seeing the
// response (forward-auth, Envoy RLS) cannot serve such a route: its
// validation refuses the route with this reason, for example
// `route "login": policy "failures": count_status needs the upstream's
// response`.
func (c *Config) NeedsResponse(r *Route) string {
	if r.CostResponseHeader != "" {
		return "cost_response_header needs the upstream's response"
	}
	for _, name := range routePolicies(c, r) {
		if why := needsResponse(c.Policies[name]); why != "" {
			return fmt.Sprintf("policy %q %s", name, why)
		}
	}
	return ""
}

// countStatusShape is count_status: status codes and classes.
func countStatusShape() schema {
	item := schema{"anyOf": []any{intShape(100, 599), schema{"type": "string", "pattern": "^([1-5]xx|[1-5][0-9][0-9])$"}}}
	return schema{"type": "array", "minItems": 1, "items": item}
}

// headerNameShape is an HTTP header name (an RFC 9110 token).
func headerNameShape() schema {
	return schema{"type": "string", "pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"}
}
