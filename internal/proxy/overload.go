package proxy

import (
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"rlproxy/internal/adaptive"
	"rlproxy/internal/config"
	"rlproxy/internal/policy"
)

// overload is a route's place at its upstream's adaptive gate (package
// adaptive); nil gate when the upstream has no adaptive_concurrency.
type overload struct {
	gate      *adaptive.Gate
	class     int            // the route's priority class
	planClass map[string]int // plan name → class, of the route's plan set
	classes   []string       // every class name, highest first
}

// newGates builds one gate per upstream with adaptive_concurrency, over
// server.priority_classes. The limit is per upstream; a reload keeps the
// gate when neither changed (KeepGates).
func newGates(cfg *config.Config, now time.Time) map[string]*adaptive.Gate {
	var classes []adaptive.Class
	for _, c := range cfg.Server.PriorityClasses {
		classes = append(classes, adaptive.Class{Name: c.Name, Share: c.Share})
	}
	if classes == nil {
		classes = []adaptive.Class{{Name: config.DefaultPriorityClass, Share: 1}}
	}
	gates := map[string]*adaptive.Gate{}
	for name, u := range cfg.Upstreams {
		if a := u.Adaptive; a != nil {
			gates[name] = adaptive.NewGate(name, adaptive.Config{Min: a.Min, Max: a.Max, Initial: a.Initial,
				Window: a.Window, Tolerance: a.Tolerance,
				QueueTimeout: a.QueueTimeout, Shadow: a.Shadow}, classes, now)
		}
	}
	return gates
}

// KeepGates makes rt use prev's gate for every upstream whose
// adaptive_concurrency and server.priority_classes are unchanged, so a
// reload keeps the learned limit and counts the requests still in flight
// under prev (a new gate beside them let max: 1 admit a second request).
// Call it before rt serves.
func (rt *Runtime) KeepGates(prev *Runtime) {
	if prev == nil || len(rt.gates) == 0 ||
		!slices.Equal(rt.Config.Server.PriorityClasses, prev.Config.Server.PriorityClasses) {
		return
	}
	for name, g := range rt.gates {
		old, was := prev.gates[name], prev.Config.Upstreams[name]
		if old == nil || was == nil || was.Adaptive == nil || *was.Adaptive != *rt.Config.Upstreams[name].Adaptive {
			continue
		}
		rt.gates[name] = old
		for _, up := range rt.upstreams {
			if up.gate == g {
				up.gate = old
			}
		}
	}
}

// newOverload returns route's place at gate: its class and its plans'.
func newOverload(cfg *config.Config, route *config.Route, gate *adaptive.Gate) overload {
	o := overload{gate: gate, classes: cfg.Server.ClassNames()}
	o.class = len(o.classes) - 1
	if route == nil {
		return o
	}
	if i := o.index(route.Priority); i >= 0 {
		o.class = i
	}
	if p := cfg.Plans[route.Plan]; p != nil && len(p.Priority) > 0 {
		o.planClass = map[string]int{}
		for plan, class := range p.Priority {
			o.planClass[plan] = o.index(class)
		}
	}
	return o
}

// index returns class name's index, or -1.
func (o *overload) index(name string) int {
	for i, c := range o.classes {
		if c == name {
			return i
		}
	}
	return -1
}

// screenPriority removes server.priority_header from r unless its peer
// (the TCP peer) is a trusted proxy. It runs on every proxied request, not
// only at a gate: an upstream without adaptive_concurrency, or an upgrade,
// would otherwise pass a class the client chose to a next hop that trusts
// this one.
func screenPriority(r *http.Request, rt *Runtime, peer netip.Addr) {
	if name := rt.Config.Server.PriorityHeader; name != "" && r.Header[name] != nil && !rt.realIP.Trusted(peer) {
		delete(r.Header, name)
	}
}

// classOf returns r's class: the trusted hop's header (screenPriority
// removed anyone else's), else its plan's (res may be nil), else the
// route's.
func (o *overload) classOf(r *http.Request, rt *Runtime, res *policy.Result) int {
	if name := rt.Config.Server.PriorityHeader; name != "" && r.Header[name] != nil {
		if i := o.index(strings.TrimSpace(r.Header.Get(name))); i >= 0 {
			return i
		}
	}
	if res != nil && o.planClass != nil {
		if c, ok := o.planClass[res.Plan()]; ok {
			return c
		}
	}
	return o.class
}

// acquireSlot waits, by r's admission (rc.adm, which its policies
// allowed), for a slot at up's adaptive gate, if it has one: the
// admission holds the slot until it finishes. A request that upgrades
// takes none (a session would hold a slot for its whole life). A request
// shed is answered here — 503 overloaded, Retry-After the queue's drain —
// and acquireSlot returns false, as it does for a client gone while
// waiting.
func (s *Server) acquireSlot(rc *record, w http.ResponseWriter, r *http.Request, up *upstream, ip netip.Addr) bool {
	o, a := &up.overload, &rc.adm
	if o.gate == nil || r.Header["Upgrade"] != nil {
		return true
	}
	var client []byte
	if a.res != nil {
		client = a.res.Credential()
	}
	if client == nil {
		b := ip.As16()
		client = b[:]
	}
	ra, ok := a.acquire(r.Context(), o.gate, o.classOf(r, a.rt, a.res), client)
	if ok || a.decision != decisionShed {
		return ok
	}
	shed := s.results.Get().(*policy.Result)
	defer s.results.Put(shed)
	shed.Binding, shed.RetryAfter, shed.Now = -1, ra*1000, 0
	writeProblem(w, r, problemOverloaded, nil, shed)
	return false
}

// Overload returns the figures of every upstream's adaptive gate at now,
// by upstream name (none without adaptive_concurrency).
func (rt *Runtime) Overload(now time.Time) []adaptive.State {
	if len(rt.gates) == 0 {
		return nil
	}
	out := make([]adaptive.State, 0, len(rt.gates))
	for _, name := range slices.Sorted(maps.Keys(rt.gates)) {
		out = append(out, rt.gates[name].State(now))
	}
	return out
}
