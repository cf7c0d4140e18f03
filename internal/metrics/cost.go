package metrics

import "github.com/prometheus/client_golang/prometheus"

// newCostHeaderInvalid builds rlproxy_cost_header_invalid_total.
func newCostHeaderInvalid() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rlproxy_cost_header_invalid_total",
		Help: "Upstream responses of a route with cost_response_header whose header and trailer were missing or not a whole number; the request kept its up-front cost.",
	}, []string{"route"})
}

// CostHeaderInvalid counts one response of route without a usable cost
// (cost_response_header missing or malformed).
func (m *Metrics) CostHeaderInvalid(route string) { m.costHeaderInvalid.WithLabelValues(route).Inc() }
