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
// server.priority_classes. The limit is per upstream and per Runtime: a
// reload starts it again from initial.
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

// classOf returns r's class: the trusted hop's header (peer is the TCP
// peer), else its plan's (res may be nil), else the route's. The header
// of an untrusted peer is removed, so the upstream never sees a class the
// client chose.
func (o *overload) classOf(r *http.Request, rt *Runtime, res *policy.Result, peer netip.Addr) int {
	if name := rt.Config.Server.PriorityHeader; name != "" && r.Header[name] != nil {
		if rt.realIP.Trusted(peer) {
			if i := o.index(strings.TrimSpace(r.Header.Get(name))); i >= 0 {
				return i
			}
		} else {
			delete(r.Header, name)
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
	ra, ok := a.acquire(r.Context(), o.gate, o.classOf(r, a.rt, a.res, rc.view.Peer.Addr().Unmap()), client)
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
