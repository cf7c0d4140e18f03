package config

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Balance values of `upstreams.NAME.balance`.
const (
	BalanceRoundRobin = "round_robin" // smooth weighted round robin (nginx default)
	BalanceLeastConn  = "least_conn"  // fewest requests in flight per weight (nginx least_conn)
	BalanceClientHash = "client_hash" // consistent hash of hash_key (nginx hash ... consistent)
)

// MaxPoolServers bounds a pool's size: a request tracks the servers it
// tried in one 64-bit set.
const MaxPoolServers = 64

// poolFields are the fields of an upstream that pool decodes (defaults
// set there: they apply to url and urls, not builtin).
func poolFields() []field {
	server := schema{"anyOf": []any{upstreamURLShape(), schema{"type": "object", "additionalProperties": false, "required": []any{"url"},
		"properties": schema{"url": upstreamURLShape(), "weight": intShape(1, 1000)}}}}
	return []field{
		{name: "urls", value: checked(func() schema {
			return schema{"type": "array", "minItems": 1, "maxItems": MaxPoolServers, "items": server}
		}),
			doc: "A pool: servers as URLs or {url, weight} (weight 1 to 1000, default 1), one scheme and one path; instead of url."},
		{name: "balance", def: BalanceRoundRobin, value: checked(func() schema { return enumShape(BalanceRoundRobin, BalanceLeastConn, BalanceClientHash) }),
			doc: "round_robin (smooth weighted, nginx default), least_conn or client_hash (consistent hash of hash_key)."},
		{name: "hash_key", def: "ip", value: checked(func() schema { return listShape(stringShape(), true) }), doc: "balance client_hash: key sources hashed, as a policy's key."},
		{name: "max_fails", def: "1", value: checked(func() schema { return intShape(0, 1000) }),
			doc: "Failures within fail_timeout that take a server out for fail_timeout (nginx max_fails); 0 = never."},
		{name: "fail_timeout", def: "10s", value: checked(func() schema { return durationShape(false) }), doc: "nginx fail_timeout: the failure window and the time out."},
		{name: "fail_statuses", value: checked(func() schema { return listShape(intShape(500, 599), false) }),
			doc: "Upstream statuses (500 to 599) that count as failures, besides connection errors and timeouts."},
		{name: "health_check", value: checked(func() schema { return objectShape(healthCheckSection()) }), doc: "Active health check of every server; absent: none."},
		{name: "retries", def: "1", value: checked(func() schema { return intShape(0, MaxPoolServers-1) }),
			doc: "Other servers tried when a request could not be sent or got a fail status (idempotent requests, body not yet streamed)."},
		{name: "retry_timeout", def: "0", value: checked(func() schema { return durationShape(true) }), doc: "Bound on the time spent retrying; 0 = none."},
	}
}

// upstreamURLShape is an http:// or https:// URL without query or fragment.
func upstreamURLShape() schema {
	return schema{"type": "string", "pattern": "^[hH][tT][tT][pP][sS]?://[^/?#]+[^?#]*$"}
}

// healthCheckSection is an upstream's `health_check:` (decoded by
// healthCheck).
func healthCheckSection() *section {
	return &section{fields: []field{
		{name: "path", def: `"/"`, value: checked(pathShape), doc: "Path probed with GET."},
		{name: "interval", def: "5s", value: checked(func() schema { return durationShape(false) }), doc: "Time between probes of one server."},
		{name: "timeout", def: "2s", value: checked(func() schema { return durationShape(false) }), doc: "Longest a probe waits, at most interval (default 2s or interval if shorter)."},
		{name: "expect_status", value: checked(func() schema { return intShape(100, 599) }), doc: "Status a healthy server answers; absent: any 2xx or 3xx."},
		{name: "fails", def: "2", value: checked(func() schema { return intShape(1, 100) }), doc: "Failed probes in a row that mark a server down."},
		{name: "passes", def: "2", value: checked(func() schema { return intShape(1, 100) }), doc: "Passed probes in a row that mark it up again."},
	}}
}

// upstreamURL decodes one server URL: http or https, a host, no query or
// fragment.
func (l *loader) upstreamURL(n *yaml.Node, field string) (*url.URL, bool) {
	s, ok := l.str(n, field)
	if !ok {
		return nil, false
	}
	v, err := url.Parse(s)
	switch {
	case !strings.Contains(s, "://"):
		// Also before url.Parse's own errors: "127.0.0.1:3000" would read
		// "first path segment in URL cannot contain colon".
		l.errorf(n, field, "%q: want an http:// or https:// URL (no scheme: did you mean \"http://%s\"?)", s, strings.TrimPrefix(s, "//"))
	case err != nil:
		l.errorf(n, field, "%q: %v", s, errors.Unwrap(err))
	case v.Scheme != "http" && v.Scheme != "https":
		l.errorf(n, field, "%q: want an http:// or https:// URL", s)
	case v.Host == "":
		l.errorf(n, field, "%q: missing the host", s)
	case v.RawQuery != "" || v.Fragment != "":
		l.errorf(n, field, "%q: must not have a query or fragment", s)
	default:
		return v, true
	}
	return nil, false
}

// pool decodes the pool fields of upstream u (url, builtin and ca_file
// are decoded by upstream, load.go) and sets their defaults.
func (l *loader) pool(o object, u *Upstream) {
	if o.bad {
		return
	}
	if u.Builtin != "" || o.has("builtin") {
		for _, f := range poolFields() {
			if o.has(f.name) {
				l.errorf(o.keys[f.name], o.field(f.name), "applies to url or urls, not builtin")
			}
		}
		return
	}
	u.Balance, u.MaxFails, u.FailTimeout, u.Retries = BalanceRoundRobin, 1, 10*time.Second, 1
	if n := o.get("urls"); n != nil {
		if o.has("url") {
			l.errorf(o.keys["urls"], o.field("urls"), "set url or urls, not both")
		} else {
			l.servers(n, o.field("urls"), u)
		}
	} else if u.URL != nil {
		u.Servers = []UpstreamServer{{URL: u.URL, Weight: 1}}
	}
	l.balance(o, u)
	l.passive(o, u)
	if n := o.get("health_check"); n != nil {
		u.HealthCheck = l.healthCheck(l.object(n, o.field("health_check"), o.keys["health_check"].Line,
			healthCheckSection().names()...))
	}
}

// servers decodes `urls:`: each item a URL or {url, weight}, all of one
// scheme and one path, none twice.
func (l *loader) servers(n *yaml.Node, path string, u *Upstream) {
	items, ok := l.list(n, path, false)
	if !ok {
		return
	}
	if len(items) == 0 || len(items) > MaxPoolServers {
		l.errorf(n, path, "want 1 to %d servers, not %d", MaxPoolServers, len(items))
		return
	}
	seen := map[string]int{}
	for i, it := range items {
		field := index(path, i)
		s := UpstreamServer{Weight: 1}
		urlNode := it
		if it.Kind == yaml.MappingNode {
			so := l.object(it, field, it.Line, "url", "weight")
			if urlNode = so.get("url"); urlNode == nil {
				l.errorf(so.missing(), so.field("url"), "required: an http:// or https:// URL")
				continue
			}
			if wn := so.get("weight"); wn != nil {
				w, _ := l.integer(wn, so.field("weight"), 1, 1000)
				s.Weight = int(w)
			}
			field = so.field("url")
		}
		v, ok := l.upstreamURL(urlNode, field)
		if !ok {
			continue
		}
		switch line, dup := seen[v.Host]; {
		case dup:
			l.errorf(urlNode, field, "%q: listed twice (first at line %d)", v.Host, line)
			continue
		case len(u.Servers) > 0 && v.Scheme != u.Servers[0].URL.Scheme:
			l.errorf(urlNode, field, "%q: all servers of a pool must be %s://", v.String(), u.Servers[0].URL.Scheme)
			continue
		case len(u.Servers) > 0 && v.Path != u.Servers[0].URL.Path:
			l.errorf(urlNode, field, "%q: all servers of a pool must have the path %q", v.String(), u.Servers[0].URL.Path)
			continue
		}
		seen[v.Host] = urlNode.Line
		s.URL = v
		u.Servers = append(u.Servers, s)
	}
	if len(u.Servers) > 0 {
		u.URL = u.Servers[0].URL
	}
}

// balance decodes balance and hash_key.
func (l *loader) balance(o object, u *Upstream) {
	if n := o.get("balance"); n != nil {
		if s, ok := l.oneOf(n, o.field("balance"), BalanceRoundRobin, BalanceLeastConn, BalanceClientHash); ok {
			u.Balance = s
		}
	}
	u.HashKey = defaultKey()
	if n := o.get("hash_key"); n != nil {
		if u.Balance != BalanceClientHash {
			l.errorf(n, o.field("hash_key"), "applies to balance: client_hash only")
			return
		}
		if srcs, ok := l.sources(n, o.field("hash_key"), false); ok {
			u.HashKey.Sources = srcs
		}
	}
}

// passive decodes max_fails, fail_timeout, fail_statuses, retries and
// retry_timeout.
func (l *loader) passive(o object, u *Upstream) {
	if n := o.get("max_fails"); n != nil {
		v, _ := l.integer(n, o.field("max_fails"), 0, 1000)
		u.MaxFails = int(v)
	}
	if n := o.get("fail_timeout"); n != nil {
		if v, ok := l.duration(n, o.field("fail_timeout"), false); ok {
			u.FailTimeout = v
		}
	}
	if n := o.get("fail_statuses"); n != nil {
		items, ok := l.list(n, o.field("fail_statuses"), false)
		for i, it := range items {
			if !ok {
				break
			}
			field := index(o.field("fail_statuses"), i)
			v, good := l.integer(it, field, 500, 599)
			switch {
			case !good:
			case slices.Contains(u.FailStatuses, int(v)):
				l.errorf(it, field, "%d: listed twice", v)
			default:
				u.FailStatuses = append(u.FailStatuses, int(v))
			}
		}
	}
	if n := o.get("retries"); n != nil {
		v, _ := l.integer(n, o.field("retries"), 0, MaxPoolServers-1)
		u.Retries = int(v)
	}
	if n := o.get("retry_timeout"); n != nil {
		u.RetryTimeout, _ = l.duration(n, o.field("retry_timeout"), true)
	}
}

// healthCheck decodes `health_check:` with its defaults.
func (l *loader) healthCheck(o object) *HealthCheck {
	h := &HealthCheck{Path: "/", Interval: 5 * time.Second, Timeout: 2 * time.Second, Fails: 2, Passes: 2}
	if n := o.get("path"); n != nil {
		if s, ok := l.str(n, o.field("path")); ok && (len(s) == 0 || s[0] != '/') {
			l.errorf(n, o.field("path"), "%q: must start with /", s)
		} else if ok {
			h.Path = s
		}
	}
	for _, f := range []struct {
		name string
		dst  *time.Duration
	}{{"interval", &h.Interval}, {"timeout", &h.Timeout}} {
		if n := o.get(f.name); n != nil {
			if v, ok := l.duration(n, o.field(f.name), false); ok {
				*f.dst = v
			}
		}
	}
	if !o.has("timeout") && h.Timeout > h.Interval {
		h.Timeout = h.Interval // the default timeout shrinks with a short interval
	} else if h.Timeout > h.Interval {
		l.errorf(o.keys["timeout"], o.field("timeout"), "%v: must not exceed interval (%v)", h.Timeout, h.Interval)
	}
	for _, f := range []struct {
		name   string
		lo, hi int64
		dst    *int
	}{{"expect_status", 100, 599, &h.ExpectStatus}, {"fails", 1, 100, &h.Fails}, {"passes", 1, 100, &h.Passes}} {
		if n := o.get(f.name); n != nil {
			if v, ok := l.integer(n, o.field(f.name), f.lo, f.hi); ok {
				*f.dst = int(v)
			}
		}
	}
	return h
}

// ReservedRouteName is the route label of requests that matched no route
// (rlproxy_http_requests_total{route="-"}): no route may be named so.
const ReservedRouteName = "-"

// reservedRouteName refuses the route name the metrics use for "no route".
func (l *loader) reservedRouteName(n *yaml.Node, field, name string) {
	if name == ReservedRouteName {
		l.errorf(n, field, "%q: reserved (the metrics' route label of requests that match no route)", name)
	}
}
