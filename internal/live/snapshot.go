package live

import (
	"math"
	"time"

	"rlproxy/internal/topk"
)

// Snapshot is what /api/stats serves: per-route rates over the last
// History seconds and per-policy top refused clients over the last minute.
type Snapshot struct {
	// Now is the snapshot's time, Unix milliseconds.
	Now int64 `json:"now"`
	// TopWindowSeconds is the span the top lists cover (60).
	TopWindowSeconds int          `json:"top_window_seconds"`
	Routes           []RouteRates `json:"routes"`
	Top              []PolicyTop  `json:"top"`
}

// RouteRates are one route's requests per second between consecutive
// samples, oldest first; At[i] is the end of interval i (Unix ms).
type RouteRates struct {
	Name    string    `json:"name"`
	At      []int64   `json:"at"`
	Allowed []float64 `json:"allowed"`
	Delayed []float64 `json:"delayed"`
	Refused []float64 `json:"refused"`
}

// PolicyTop is one policy's most refused clients.
type PolicyTop struct {
	Policy string `json:"policy"`
	// Refused is the policy's refusals in the window (N of the error bound).
	Refused uint64 `json:"refused"`
	// MaxError bounds every entry's overcount: N / topk capacity.
	MaxError uint64       `json:"max_error"`
	Clients  []topk.Entry `json:"clients"`
}

// Snapshot returns the routes (in configuration order) and, per policy
// with refusals, its n most refused clients, ids passed through display
// (the admin page hashes IP addresses unless told to show them).
func (r *Recorder) Snapshot(n int, display func(id string) string) Snapshot {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Snapshot{Now: now.UnixMilli(), TopWindowSeconds: int(TopSteps * TopStep / time.Second),
		Routes: []RouteRates{}, Top: []PolicyTop{}}
	routes := *r.routes.Load()
	for _, name := range r.order {
		s.Routes = append(s.Routes, routes[name].rates(name))
	}
	tops := *r.tops.Load()
	for _, name := range r.pols {
		top, total := tops[name].Top(now, n)
		if total == 0 {
			continue
		}
		for i := range top {
			top[i].ID = display(top[i].ID)
		}
		s.Top = append(s.Top, PolicyTop{Policy: name, Refused: total, MaxError: total / TopCapacity, Clients: top})
	}
	return s
}

// rates turns rs's samples into per-second rates, oldest first.
func (rs *routeStats) rates(name string) RouteRates {
	out := RouteRates{Name: name, At: []int64{}, Allowed: []float64{}, Delayed: []float64{}, Refused: []float64{}}
	first := (rs.next - rs.n + len(rs.ring)) % len(rs.ring)
	for i := 1; i < rs.n; i++ {
		a, b := &rs.ring[(first+i-1)%len(rs.ring)], &rs.ring[(first+i)%len(rs.ring)]
		dt := b.at.Sub(a.at).Seconds()
		if dt <= 0 {
			continue
		}
		out.At = append(out.At, b.at.UnixMilli())
		out.Allowed = append(out.Allowed, rate(b.allowed-a.allowed, dt))
		out.Delayed = append(out.Delayed, rate(b.delayed-a.delayed, dt))
		out.Refused = append(out.Refused, rate(b.refused-a.refused, dt))
	}
	return out
}

// rate is n per dt seconds, to 0.1.
func rate(n uint64, dt float64) float64 {
	return math.Round(float64(n)/dt*10) / 10
}
