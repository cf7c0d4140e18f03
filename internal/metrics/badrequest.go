package metrics

import "github.com/prometheus/client_golang/prometheus"

// newBadRequests builds rlproxy_bad_requests_total{reason} and registers
// it on reg.
func newBadRequests(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rlproxy_bad_requests_total",
		Help: "Requests refused with 400 before any route saw them because they cannot be read unambiguously, by reason: method, target, path, host, content_length, duplicate_credential.",
	}, []string{"reason"})
	reg.MustRegister(c)
	return c
}

// BadRequests returns the rlproxy_bad_requests_total series of reason (a
// reqview.Reason's String), created at 0. Resolve each reason once (the
// proxy does, at start), so the request path only calls Inc.
func (m *Metrics) BadRequests(reason string) prometheus.Counter {
	return m.badRequests.WithLabelValues(reason)
}
