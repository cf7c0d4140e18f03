package metrics

import (
	dto "github.com/prometheus/client_model/go"
)

// StoreUp reports rlproxy_store_up's value (for the admin page's overview).
func (m *Metrics) StoreUp() bool { return gaugeSet(m.storeUp) }

// BreakerOpen reports rlproxy_breaker_open's value.
func (m *Metrics) BreakerOpen() bool { return gaugeSet(m.breakerOpen) }

// gaugeSet reports whether g is 1 (these gauges are 0 or 1).
func gaugeSet(g interface{ Write(*dto.Metric) error }) bool {
	var d dto.Metric
	return g.Write(&d) == nil && d.GetGauge().GetValue() == 1
}
