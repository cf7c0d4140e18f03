package metrics

import "github.com/prometheus/client_golang/prometheus"

// Store cleanup operations: the op label of
// rlproxy_store_cleanup_errors_total. Each undoes or extends a charge after
// the decision (package policy: Limiter.Refund, Release, Renew).
const (
	CleanupRefund  = "refund"  // a refused or settled request's charge given back
	CleanupRelease = "release" // a finished request's concurrency leases ended
	CleanupRenew   = "renew"   // a long request's concurrency leases refreshed
)

// newCleanupErrors builds rlproxy_store_cleanup_errors_total with every op
// series at 0, so rate() sees them before the first failure.
func newCleanupErrors() *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rlproxy_store_cleanup_errors_total",
		Help: "Store refunds, lease releases and lease renewals that failed; the charge or lease then stands until it expires.",
	}, []string{"op"})
	for _, op := range [...]string{CleanupRefund, CleanupRelease, CleanupRenew} {
		v.WithLabelValues(op)
	}
	return v
}

// CleanupError counts one failed store cleanup of kind op (CleanupRefund,
// CleanupRelease, CleanupRenew).
func (m *Metrics) CleanupError(op string) { m.cleanupErrors.WithLabelValues(op).Inc() }
