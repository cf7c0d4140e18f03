// Package live keeps what the admin page shows of the last minutes of
// traffic, at a cost to the request path of a few atomic additions per
// request and, per refusal, one top-K update: per-route counts of allowed,
// delayed and refused requests sampled every second into a fixed ring
// (History seconds), and per policy the clients it refused most in the last
// minute (a topk.Window). Nothing grows with traffic or with clients.
package live

import (
	"sync"
	"sync/atomic"
	"time"

	"rlproxy/internal/config"
	"rlproxy/internal/policy"
	"rlproxy/internal/topk"
)

const (
	// History is how many one-second samples each route keeps: 5 minutes.
	History = 300
	// TopCapacity is the counters of each per-policy top-K step; a client
	// refused more than 1/TopCapacity of a step's refusals is always found.
	TopCapacity = 128
	// TopSteps × TopStep is the top-K window: the last minute, in 10 s steps.
	TopSteps = 6
	TopStep  = 10 * time.Second
)

// Recorder is the live state of one process; it survives reloads
// (Configure adds the routes and policies of a new configuration and keeps
// the state of those already known). Safe for concurrent use.
type Recorder struct {
	now    func() time.Time
	routes atomic.Pointer[map[string]*routeStats]
	tops   atomic.Pointer[map[string]*topk.Window]

	mu    sync.Mutex // serialises Configure, Sample and Snapshot
	order []string   // route names of the last Configure, in file order
	pols  []string   // policy names of the last Configure, in file order
}

// routeStats are one route's running totals and their per-second samples.
type routeStats struct {
	allowed, delayed, refused atomic.Uint64

	ring [History + 1]sample // guarded by Recorder.mu
	next int                 // ring index of the next sample
	n    int                 // samples stored, ≤ len(ring)
}

type sample struct {
	at                        time.Time
	allowed, delayed, refused uint64
}

// New returns an empty Recorder reading the time from now (time.Now in
// production).
func New(now func() time.Time) *Recorder {
	r := &Recorder{now: now}
	r.routes.Store(&map[string]*routeStats{})
	r.tops.Store(&map[string]*topk.Window{})
	return r
}

// Configure makes cfg's routes and policies the ones recorded and shown.
// Call it before the configuration serves requests: requests of a route it
// does not know are not recorded.
func (r *Recorder) Configure(cfg *config.Config) {
	r.mu.Lock()
	defer r.mu.Unlock()
	oldR, oldT := *r.routes.Load(), *r.tops.Load()
	routes := make(map[string]*routeStats, len(cfg.Routes))
	r.order = r.order[:0]
	for _, rt := range cfg.Routes {
		rs := oldR[rt.Name]
		if rs == nil {
			rs = &routeStats{}
		}
		routes[rt.Name] = rs
		r.order = append(r.order, rt.Name)
	}
	tops := make(map[string]*topk.Window, len(cfg.Policies))
	r.pols = append(r.pols[:0], cfg.PolicyOrder...)
	for _, name := range cfg.PolicyOrder {
		w := oldT[name]
		if w == nil {
			w = topk.NewWindow(TopCapacity, TopSteps, TopStep)
		}
		tops[name] = w
	}
	r.routes.Store(&routes)
	r.tops.Store(&tops)
}

// Observe records the decision res on route (after Limiter.Decide): one
// allowed, delayed or refused request, and for a refusal the client of
// every policy that refused it; res nil is a request of a route without
// policies, allowed. It does not allocate; a nil Recorder records nothing.
func (r *Recorder) Observe(route *policy.Route, res *policy.Result) {
	if r == nil {
		return
	}
	rs := (*r.routes.Load())[route.Name]
	if rs == nil {
		return
	}
	switch {
	case res == nil:
		rs.allowed.Add(1)
		return
	case res.Outcome == policy.Refuse:
		rs.refused.Add(1)
	case res.Outcome != policy.Pass:
		return // 503: the limiter could not decide
	case res.Wait > 0:
		rs.delayed.Add(1)
		return
	default:
		rs.allowed.Add(1)
		return
	}
	tops := *r.tops.Load()
	var now time.Time
	for i := range res.Items {
		it := &res.Items[i]
		if it.Status != policy.Rejected {
			continue
		}
		if w := tops[it.Policy.Name]; w != nil {
			if now.IsZero() {
				now = r.now()
			}
			w.Add(now, ClientID(res.KeyFor(i)))
		}
	}
}

// ClientID is the client id inside a store key, the part between its hash
// tag's braces (DESIGN.md "Key format": `<prefix>v1:{<client>}:<policy>…`),
// or the key itself when it has none.
func ClientID(key string) string {
	open, end := -1, -1
	for i := 0; i < len(key); i++ {
		if key[i] == '{' && open < 0 {
			open = i
		} else if key[i] == '}' && open >= 0 {
			end = i
			break
		}
	}
	if open < 0 || end < 0 {
		return key
	}
	return key[open+1 : end]
}

// Run samples every second until done is closed.
func (r *Recorder) Run(done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	r.Sample()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			r.Sample()
		}
	}
}

// Sample stores each route's totals at r's current time; Run calls it
// every second, tests call it with an injected clock.
func (r *Recorder) Sample() {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range *r.routes.Load() {
		rs.ring[rs.next] = sample{at: now, allowed: rs.allowed.Load(), delayed: rs.delayed.Load(), refused: rs.refused.Load()}
		rs.next = (rs.next + 1) % len(rs.ring)
		rs.n = min(rs.n+1, len(rs.ring))
	}
}
