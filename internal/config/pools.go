package config

import (
	"errors"
	"net/url"
	"slices"
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

// poolFields are the fields of an upstream that pools.go decodes.
var poolFields = []string{"urls", "balance", "hash_key", "max_fails", "fail_timeout",
	"fail_statuses", "health_check", "retries", "retry_timeout"}

// upstreamFields are all the fields of an upstream.
func upstreamFields() []string {
	return append([]string{"url", "builtin", "ca_file", "response_header_timeout",
		"host", "tls_server_name", "protocol", "request_headers", "response_headers"}, poolFields...)
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
		for _, f := range poolFields {
			if o.has(f) {
				l.errorf(o.keys[f], o.field(f), "applies to url or urls, not builtin")
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
			"path", "interval", "timeout", "expect_status", "fails", "passes"))
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
