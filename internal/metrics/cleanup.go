package metrics

import "github.com/prometheus/client_golang/prometheus"

// Store cleanup operations: the op label of
// rlproxy_store_cleanup_errors_total. Each undoes or extends a charge after
// the decision (package policy: Limiter.Refund, Settle, Release, Renew).
const (
	CleanupRefund  = "refund"  // a refused or settled request's charge given back
	CleanupRelease = "release" // a finished request's concurrency leases ended
	CleanupRenew   = "renew"   // a long request's concurrency leases refreshed
	CleanupCharge  = "charge"  // a response's cost beyond the up-front one charged
)

// newCleanupErrors builds rlproxy_store_cleanup_errors_total with every op
// series at 0, so rate() sees them before the first failure.
func newCleanupErrors() *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rlproxy_store_cleanup_errors_total",
		Help: "Store refunds, lease releases, lease renewals and response-cost charges that failed; the charge or lease then stands until it expires (a charge is lost).",
	}, []string{"op"})
	for _, op := range [...]string{CleanupRefund, CleanupRelease, CleanupRenew, CleanupCharge} {
		v.WithLabelValues(op)
	}
	return v
}

// CleanupError counts one failed store cleanup of kind op (CleanupRefund,
// CleanupRelease, CleanupRenew, CleanupCharge).
func (m *Metrics) CleanupError(op string) { m.cleanupErrors.WithLabelValues(op).Inc() }
