package config

import (
	"net/textproto"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// AdaptiveConcurrency is an upstream's `adaptive_concurrency:` (package
// adaptive): the requests in flight to it are bounded by a limit that
// follows its latency. Only upstreams have one.
type AdaptiveConcurrency struct {
	Min, Max     int           // bounds of the limit, requests (default 1, 1000)
	Initial      int           // the limit at start (default 10, within [Min, Max])
	Window       time.Duration // how often the limit is recomputed (default 100ms)
	Tolerance    float64       // cruising headroom over the estimated concurrency, a fraction (default 0.1)
	QueueTimeout time.Duration // longest wait for a slot, within server.max_wait (default 500ms)
	Shadow       bool          // compute and report the limit, never queue or shed
}

// PriorityClass is one of server.priority_classes: requests of a class
// are guaranteed Share (a fraction of an adaptive limit) under contention.
type PriorityClass struct {
	Name  string
	Share float64
}

// DefaultPriorityClass is the one class when server.priority_classes is absent.
const DefaultPriorityClass = "default"

// adaptiveSection is `upstreams.NAME.adaptive_concurrency:`; present, it
// sets u.Adaptive.
func (l *loader) adaptiveSection(u *Upstream) *section {
	a := &AdaptiveConcurrency{}
	return &section{optional: true, fields: []field{
		{name: "min", def: "1", value: l.intVal(&a.Min, 1, 1_000_000), doc: "Lowest limit, requests in flight."},
		{name: "max", def: "1000", value: l.intVal(&a.Max, 1, 1_000_000), doc: "Highest limit, requests in flight."},
		{name: "initial", def: "10", value: l.intVal(&a.Initial, 1, 1_000_000), doc: "Limit at start, within [min, max]; it doubles each window while throughput grows (slow start)."},
		{name: "window", def: "100ms", value: l.durationVal(&a.Window, false), doc: "How often the limit is recomputed from the throughput and the median latency to the response head (at least 5 responses)."},
		{name: "tolerance", def: "0.1", value: l.ratioVal(&a.Tolerance), doc: "Cruising headroom over the estimated concurrency (best throughput × latency without a queue), a fraction in (0, 1]."},
		{name: "queue_timeout", def: "500ms", value: l.durationVal(&a.QueueTimeout, false), doc: "Longest a request waits for a slot (and at most server.max_wait); past it, 503 overloaded."},
		{name: "shadow", def: "false", value: l.boolVal(&a.Shadow), doc: "Compute and report the limit but never queue or shed."},
	}, pre: func(object) { u.Adaptive = a }, check: func(o object) {
		switch {
		case a.Min > a.Max:
			l.errorf(o.keys["min"], o.field("min"), "%d: must not exceed max (%d)", a.Min, a.Max)
		case !o.has("initial") && a.Initial < a.Min:
			a.Initial = a.Min
		case !o.has("initial") && a.Initial > a.Max:
			a.Initial = a.Max
		case a.Initial < a.Min || a.Initial > a.Max:
			l.errorf(o.keys["initial"], o.field("initial"), "%d: must be within min (%d) and max (%d)", a.Initial, a.Min, a.Max)
		}
	}}
}

// priorityFields are server.priority_classes and server.priority_header.
func (l *loader) priorityFields() []field {
	s := &l.c.Server
	class := schema{"type": "object", "additionalProperties": false, "required": []any{"name", "share"},
		"properties": schema{"name": schema{"type": "string", "minLength": 1}, "share": schema{"type": "number", "minimum": 0, "maximum": 1}}}
	classes := value{func() schema { return schema{"type": "array", "minItems": 1, "items": class} }, l.priorityClasses}
	header := value{headerNameShape, func(n *yaml.Node, path string) {
		if v, ok := l.str(n, path); ok && !validToken(v) {
			l.errorf(n, path, "%q is not a header name", v)
		} else if ok && framingField(v) {
			l.errorf(n, path, "%q frames or routes the request (RFC 9110 §7.6.1, §7.2): name a header of its own", v)
		} else if ok {
			s.PriorityHeader = textproto.CanonicalMIMEHeaderKey(v)
		}
	}}
	return []field{
		{name: "priority_classes", value: classes,
			doc: "Priority classes, highest first, each {name, share}: the share (0 to 1, summing to at most 1) of an upstream's adaptive limit its requests are guaranteed; absent: one class, default. A request with no class is in the lowest."},
		{name: "priority_header", value: header,
			doc: "Request header naming a request's priority class, believed from real_ip.trusted_proxies only (and removed from others' requests); it overrides the route's and the plan's."},
	}
}

// warnPriorityHeader warns about a server.priority_header no request can
// set: it is believed only from real_ip.trusted_proxies, and there are none.
func (l *loader) warnPriorityHeader(top object) {
	if l.c.Server.PriorityHeader != "" && len(l.c.RealIP.TrustedProxies) == 0 {
		l.warnf(mappingValue(top.get("server"), "priority_header"), "server.priority_header",
			"ignored: no real_ip.trusted_proxies, the only peers it is believed from (every other peer's is removed)")
	}
}

// framingField reports whether name is a field HTTP itself reads (the
// message's framing, its connection's options, its host), which cannot
// carry a priority class: removing it from an untrusted peer's request
// would change the request.
func framingField(name string) bool {
	switch textproto.CanonicalMIMEHeaderKey(name) {
	case "Connection", "Content-Length", "Host", "Keep-Alive", "Proxy-Connection",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// priorityClasses decodes server.priority_classes.
func (l *loader) priorityClasses(n *yaml.Node, path string) {
	items, ok := l.list(n, path, false)
	if !ok {
		return
	}
	if len(items) == 0 {
		l.errorf(n, path, "want at least one class")
		return
	}
	var classes []PriorityClass
	seen := map[string]int{}
	sum := 0.0
	for i, it := range items {
		o := l.object(it, index(path, i), it.Line, "name", "share")
		var c PriorityClass
		nn, sn := o.get("name"), o.get("share")
		if nn == nil || sn == nil {
			l.errorf(o.missing(), index(path, i), "want {name, share}")
			continue
		}
		name, ok := l.str(nn, o.field("name"))
		if !ok || name == "" {
			if ok {
				l.errorf(nn, o.field("name"), "must not be empty")
			}
			continue
		}
		if line, dup := seen[name]; dup {
			l.errorf(nn, o.field("name"), "%q: duplicate class (first at line %d)", name, line)
			continue
		}
		seen[name] = nn.Line
		share, ok := l.share(sn, o.field("share"))
		if !ok {
			continue
		}
		c.Name, c.Share = name, share
		sum += share
		classes = append(classes, c)
	}
	if sum > 1+1e-9 {
		l.errorf(n, path, "the shares sum to %g: at most 1", sum)
	}
	l.c.Server.PriorityClasses = classes
}

// share decodes a class's share, a number in [0, 1]: 0 guarantees the class
// nothing (it gets what the others leave), unlike breaker ratios' (0, 1].
func (l *loader) share(n *yaml.Node, path string) (float64, bool) {
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!float" || n.ShortTag() == "!!int") {
		if v, err := strconv.ParseFloat(n.Value, 64); err == nil && v >= 0 && v <= 1 {
			return v, true
		}
	}
	l.errorf(n, path, "%s: want a number from 0 to 1", describe(n))
	return 0, false
}

// ClassNames returns the configured priority classes' names, highest
// first (DefaultPriorityClass alone when none is configured).
func (s *Server) ClassNames() []string {
	if len(s.PriorityClasses) == 0 {
		return []string{DefaultPriorityClass}
	}
	names := make([]string, len(s.PriorityClasses))
	for i, c := range s.PriorityClasses {
		names[i] = c.Name
	}
	return names
}

// priorityRef decodes a class name at n for path (a route's priority or a
// plan's), checked against server.priority_classes.
func (l *loader) priorityRef(n *yaml.Node, path string) (string, bool) {
	s, ok := l.str(n, path)
	if ok && l.ref(n, path, "priority class", s, l.c.Server.ClassNames()) {
		return s, true
	}
	return "", false
}

// planPriorities decodes plans.NAME.priority: plan → class; every plan
// must be one of the set's (names).
func (l *loader) planPriorities(n *yaml.Node, path string, names []string) map[string]string {
	out := map[string]string{}
	for _, e := range l.entries(n, path) {
		p := join(path, e.name)
		if !l.ref(e.key, p, "plan", e.name, names) {
			continue
		}
		if c, ok := l.priorityRef(e.val, p); ok {
			out[e.name] = c
		}
	}
	return out
}
