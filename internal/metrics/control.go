package metrics

import "github.com/prometheus/client_golang/prometheus"

// controlMetrics are the series of the operators' entries (package
// control) and of the penalty box.
type controlMetrics struct {
	penalties *prometheus.CounterVec
	orphans   prometheus.Gauge
}

// newControlMetrics builds rlproxy_penalties_total{policy} and
// rlproxy_control_orphans and registers them on reg.
func newControlMetrics(reg prometheus.Registerer) *controlMetrics {
	c := &controlMetrics{
		penalties: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rlproxy_penalties_total",
			Help: "Clients put in a policy's penalty box (penalty: after refusals within a window), by policy; under dry_run counted, not enforced.",
		}, []string{"policy"}),
		orphans: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rlproxy_control_orphans",
			Help: "Entries set through the admin API that no longer apply (their policy, key source or hash secret changed): listed with the reason, never applied.",
		}),
	}
	reg.MustRegister(c.penalties, c.orphans)
	return c
}

// Penalties returns policy's rlproxy_penalties_total series, created at
// 0. Resolve it once per compiled policy: the request path only calls Inc.
func (m *Metrics) Penalties(policy string) prometheus.Counter {
	return m.control.penalties.WithLabelValues(policy)
}

// SetControlOrphans sets rlproxy_control_orphans.
func (m *Metrics) SetControlOrphans(n int) { m.control.orphans.Set(float64(n)) }
