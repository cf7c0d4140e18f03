package adaptive

import "time"

// State is a Gate's figures at one instant, for metrics and the admin page.
type State struct {
	Upstream string
	Shadow   bool
	Limit    int           // requests that may be in flight now
	Estimate float64       // the estimator's limit, fractional
	MinRTT   time.Duration // the latency without a queue the estimate uses (0: none yet)
	RTT      time.Duration // the last window's median latency (0: none yet)
	Classes  []ClassState  // in priority order, high first
}

// ClassState is one priority class's figures in a State.
type ClassState struct {
	Name     string
	InFlight int    // requests of the class holding a slot
	Queued   int    // requests of the class waiting for one
	Shed     uint64 // requests of the class shed since the Gate was built
}

// State returns g's figures now, its estimator's window closed first if
// it is over at now (an idle upstream's limit is not left stale).
func (g *Gate) State(now time.Time) State {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.est.Tick(now)
	g.dispatch(now)
	s := State{Upstream: g.Upstream, Shadow: g.cfg.Shadow, Limit: g.est.Limit(), Estimate: g.est.Estimate(),
		MinRTT: g.est.MinRTT(), RTT: g.est.RTT(), Classes: make([]ClassState, len(g.classes))}
	for i, c := range g.classes {
		s.Classes[i] = ClassState{Name: c.Name, InFlight: g.byClass[i].inflight, Queued: g.byClass[i].queued, Shed: g.shed[i].Load()}
	}
	return s
}
