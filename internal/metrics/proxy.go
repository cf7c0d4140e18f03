package metrics

import "github.com/prometheus/client_golang/prometheus"

// Reasons of rlproxy_proxy_errors_total: answers rlproxy gives in its own
// name on the forwarding path other than an upstream's 502 (which
// rlproxy_upstream_errors_total counts).
const (
	ReasonUpstreamTimeout = "upstream_timeout" // no response header within the upstream's timeouts: 504
	ReasonClientBody      = "client_body"      // the client's body was malformed or cut short: 400
	ReasonClientRequest   = "client_request"   // the upstream transport refused to send the request as it came (a method that is not a token): 400
)

// newProxyErrors is rlproxy_proxy_errors_total{route,reason}.
func newProxyErrors() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rlproxy_proxy_errors_total",
		Help: "Forwarded requests answered by rlproxy instead of the upstream, by reason: upstream_timeout (504), client_body and client_request (400, the client's fault).",
	}, []string{"route", "reason"})
}

// ProxyErrors returns route's rlproxy_proxy_errors_total series for reason
// (ReasonUpstreamTimeout, ReasonClientBody, ReasonClientRequest). Resolve it once per compiled
// config, like UpstreamErrors.
func (m *Metrics) ProxyErrors(route, reason string) prometheus.Counter {
	return m.proxyErrors.WithLabelValues(route, reason)
}
