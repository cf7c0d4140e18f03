package metrics

import "github.com/prometheus/client_golang/prometheus"

// NewGenerationsRetained builds rlproxy_config_generations_retained and
// registers it on reg: the configuration generations a reload replaced
// that are not closed yet, because a request that began under them is
// still running (a long download, a WebSocket) — at most until
// server.shutdown_timeout after their replacement. It panics if reg
// already holds it (one per registry).
func NewGenerationsRetained(reg prometheus.Registerer) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rlproxy_config_generations_retained",
		Help: "Configuration generations replaced by a reload but not yet closed: requests that began under them are still running (closed at the latest server.shutdown_timeout after the reload).",
	})
	reg.MustRegister(g)
	return g
}
