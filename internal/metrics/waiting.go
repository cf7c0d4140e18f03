package metrics

import "github.com/prometheus/client_golang/prometheus"

// newWaitingLimit is rlproxy_waiting_requests_limit: server.max_waiting of
// the configuration served, so a dashboard or an alert can compare
// rlproxy_waiting_requests with its cap without knowing the file.
func newWaitingLimit() prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rlproxy_waiting_requests_limit",
		Help: "server.max_waiting of the running configuration: past it, requests a policy delays are refused (rlproxy_shaping_refusals_total{cap=\"max_waiting\"}).",
	})
}

// SetWaitingLimit records server.max_waiting (requests) of the
// configuration now served; call it on every load and reload.
func (m *Metrics) SetWaitingLimit(n int) { m.waitingLimit.Set(float64(n)) }
