package admin

import (
	"time"

	"rlproxy/internal/adaptive"
	"rlproxy/internal/live"
	"rlproxy/internal/proxy"
)

// stats is GET /api/stats: the live rates and, for upstreams with
// adaptive_concurrency, their limit and shedding now.
type stats struct {
	live.Snapshot
	Overload []overloadView `json:"overload"`
}

// overloadView is one upstream's adaptive gate as the page shows it.
type overloadView struct {
	Upstream string      `json:"upstream"`
	Shadow   bool        `json:"shadow"`
	Limit    int         `json:"limit"`
	Estimate float64     `json:"estimate"` // concurrency, requests
	MinRTTMS float64     `json:"min_latency_ms"`
	Classes  []classView `json:"classes"`
}

// classView is one priority class of an overloadView.
type classView struct {
	Name     string `json:"name"`
	InFlight int    `json:"in_flight"`
	Queued   int    `json:"queued"`
	Shed     uint64 `json:"shed"`
}

// overloadViews returns the adaptive gates of rt at now.
func overloadViews(rt *proxy.Runtime, now time.Time) []overloadView {
	states := rt.Overload(now)
	out := make([]overloadView, 0, len(states))
	for _, s := range states {
		out = append(out, viewOf(s))
	}
	return out
}

func viewOf(s adaptive.State) overloadView {
	v := overloadView{Upstream: s.Upstream, Shadow: s.Shadow, Limit: s.Limit,
		Estimate: float64(int64(s.Estimate*10+0.5)) / 10, MinRTTMS: float64(s.MinRTT.Microseconds()) / 1000}
	for _, c := range s.Classes {
		v.Classes = append(v.Classes, classView{Name: c.Name, InFlight: c.InFlight, Queued: c.Queued, Shed: c.Shed})
	}
	return v
}
