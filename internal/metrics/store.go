package metrics

import "github.com/prometheus/client_golang/prometheus"

// Fallback mode label values of rlproxy_store_fallback_decisions_total:
// how a policy decided without the store (docs/CONTRACT.md, "Extensions
// of the second round").
const (
	FallbackOpen   = "open"   // on_store_error allow, no floor: passed unlimited
	FallbackFloor  = "floor"  // on_store_error allow with a fallback: the per-instance floor decided
	FallbackClosed = "closed" // on_store_error deny: refused with 503
)

// storeMetrics are the collectors that say what a store outage cost the
// users, beside rlproxy_store_up and rlproxy_store_errors_total (round trips).
type storeMetrics struct {
	fallback *prometheus.CounterVec
	nodeUp   *prometheus.GaugeVec
}

// newStoreMetrics builds and registers the store collectors on reg.
func newStoreMetrics(reg *prometheus.Registry) *storeMetrics {
	s := &storeMetrics{
		fallback: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rlproxy_store_fallback_decisions_total",
			Help: "Policy decisions made without the store (store error or open circuit), by policy and by " +
				"the policy's fail mode: open (passed), floor (the per-instance fallback decided), closed (503).",
		}, []string{"policy", "mode"}),
		nodeUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rlproxy_store_node_up",
			Help: "1 while the circuit breaker of this store node (a Cluster master by address, or the one server) is closed, 0 while it is open.",
		}, []string{"node"}),
	}
	reg.MustRegister(s.fallback, s.nodeUp)
	return s
}

// FallbackMode is the mode label of a policy that fails closed (closed),
// or fails open with a per-instance floor in use (floor), or neither (open).
func FallbackMode(closed, floor bool) string {
	switch {
	case closed:
		return FallbackClosed
	case floor:
		return FallbackFloor
	}
	return FallbackOpen
}

// StoreFallback counts one decision of policy made without the store, in
// mode (FallbackMode). It looks the series up by label: it runs only while the store fails.
func (m *Metrics) StoreFallback(policy, mode string) {
	m.store.fallback.WithLabelValues(policy, mode).Inc()
}

// SetStoreNodeUp records the breaker's view of one store node (its
// circuit closed: up). Nodes come from the store's topology: a handful.
func (m *Metrics) SetStoreNodeUp(node string, up bool) {
	m.store.nodeUp.WithLabelValues(node).Set(b2f(up))
}

// DeleteStoreNode deletes node's rlproxy_store_node_up series: the node
// left the store's topology (a Cluster master that died and was replaced),
// so the gauge describes only nodes that exist.
func (m *Metrics) DeleteStoreNode(node string) {
	m.store.nodeUp.DeleteLabelValues(node)
}
