package policy

import (
	"context"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/metrics"
	"rlproxy/internal/store"
)

// cleanupTimeout bounds a Refund or Release: they run after the request's
// own context may have ended (the client left), on a context of their own.
const cleanupTimeout = time.Second

// Settlement is what the response of a forwarded request said, for Settle.
type Settlement struct {
	// Status is the response's status code: the upstream's, or the one
	// rlproxy answered in its place (502, 504, 408), or 499 (nginx's
	// "client closed request") when the client left before any was sent.
	Status int
	// Cost is the request's real cost from the response (its route's
	// cost_response_header), when HasCost; without it (no such header on
	// the route, or a value missing or malformed) the up-front cost stands.
	Cost    int64
	HasCost bool
}

// Settle finishes res's decision once its response is known. It walks
// res's record like Refund (store decisions that charged, the fallback
// floor included) and, per policy:
//
//   - count_status: the request was charged a reservation at Decide (so a
//     client at its limit is refused before the upstream, and concurrent
//     requests can never admit more than the limit of counted outcomes);
//     when the status is not one the policy counts, the reservation is
//     refunded, at the instant and cost it was charged;
//   - a response cost (s.HasCost): the difference to the cost charged at
//     Decide is refunded at that instant (cheaper), or charged now without
//     refusal (dearer: store.Store.Charge; a bucket may go into debt).
//
// Concurrency policies keep their lease (Release ends it). Settle runs at
// most once, and is a no-op for a Result that was refused or already
// refunded. The request's rlproxy_requests_total decision stays what
// Decide counted (allowed or delayed): the metric counts decisions, not
// charges. Call it before Release.
func (l *Limiter) Settle(res *Result, s Settlement) {
	if res.Outcome != Pass || res.refunded || res.settled {
		return
	}
	res.settled = true
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	for st := range res.stages {
		if d := &res.stages[st]; d.charged {
			l.settleStage(ctx, res, stage(st), s)
		}
	}
}

// settleStage settles the checks of one charged decision of res.
func (l *Limiter) settleStage(ctx context.Context, res *Result, st stage, s Settlement) {
	d := &res.stages[st]
	res.settle, res.extra = res.settle[:0], res.extra[:0]
	for i := range res.Items {
		it := &res.Items[i]
		if it.stage != st {
			continue
		}
		ck := d.checks[it.check]
		switch {
		case ck.Limit.Kind == algo.Concurrency:
		case it.Policy.CountStatus != nil && !it.Policy.CountStatus.Has(s.Status):
			res.settle = append(res.settle, ck)
		case s.HasCost && s.Cost < ck.Cost:
			ck.Cost -= s.Cost
			res.settle = append(res.settle, ck)
		case s.HasCost && s.Cost > ck.Cost:
			ck.Cost = s.Cost - ck.Cost
			res.extra = append(res.extra, ck)
		}
	}
	if len(res.settle) > 0 {
		l.cleanupFailed(ctx, metrics.CleanupRefund, l.storeFor(st).Refund(ctx, res.settle, d.at))
	}
	if len(res.extra) > 0 {
		l.cleanupFailed(ctx, metrics.CleanupCharge, l.storeFor(st).Charge(ctx, res.extra, l.decideAt()))
	}
}

// storeFor is the store that decided stage s.
func (l *Limiter) storeFor(s stage) store.Store {
	if s == stageFloor {
		return l.floor
	}
	return l.store
}

// Release ends the concurrency leases res holds (enforcing and dry-run);
// call it once the request is done with, whatever its fate after the
// decision: proxied, abandoned by the client, or refused while waiting. A
// refunded Result holds none (Refund released them).
func (l *Limiter) Release(res *Result) {
	if !res.HasLeases() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	for _, s := range [...]stage{stageEnforce, stageDryRun} {
		if d := &res.stages[s]; d.leases() {
			l.cleanupFailed(ctx, metrics.CleanupRelease, l.store.Release(ctx, d.checks))
		}
	}
}

// Refund undoes the charges of res, a Pass decision that the proxy then
// refused itself: a shaping cap (server.max_wait, server.max_waiting) turned
// the wait the policies granted into a refusal, and a refused request is
// charged by none (docs/CONTRACT.md). It walks res's record and refunds
// every decision that charged, at the instant and with the cost it was
// charged: the enforcing checks (store.Store.Refund, concurrency leases
// included), the dry-run checks, and the per-instance fallback floor when
// a store error made it decide; other requests' charges since are kept.
// It runs at most once per Result, on its own context (1 s), and is a
// no-op for any other outcome. Metrics: the policies counted the request
// when it was decided (delayed, as they decided) and Refund does not
// recount it; the caller counts the refusal itself
// (metrics.ShapingRefusal). A refund the store fails leaves that charge to
// expire like any other; failures are counted
// (rlproxy_store_cleanup_errors_total) and logged at debug.
func (l *Limiter) Refund(res *Result) {
	if res.Outcome != Pass || res.refunded {
		return
	}
	res.refunded = true
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	for s := range res.stages {
		d := &res.stages[s]
		if !d.charged {
			continue
		}
		l.cleanupFailed(ctx, metrics.CleanupRefund, l.storeFor(stage(s)).Refund(ctx, d.checks, d.at))
	}
}

// Renew refreshes the concurrency leases of a long-running request (SSE,
// WebSocket) so they do not expire while it runs.
func (l *Limiter) Renew(ctx context.Context, res *Result) {
	// One decision per lease: a decision refuses as a whole, so one lease
	// that could not be renewed (it expired and its slot was taken) must not
	// stop the others from being refreshed.
	var out [1]algo.Decision
	for _, s := range [...]stage{stageEnforce, stageDryRun} {
		d := &res.stages[s]
		if !d.leases() {
			continue
		}
		for _, ck := range d.checks {
			if ck.Lease != "" {
				_, err := l.store.Decide(ctx, []store.Check{ck}, l.decideAt(), out[:])
				l.cleanupFailed(ctx, metrics.CleanupRenew, err)
			}
		}
	}
}

// cleanupFailed counts and logs (at debug: the charge or lease expires on
// its own, and a store outage is already counted and logged) a store
// cleanup op that failed. An op whose ctx ended (a request's renewals
// stopped as it finished) did not fail.
func (l *Limiter) cleanupFailed(ctx context.Context, op string, err error) {
	if err == nil || ctx.Err() != nil {
		return
	}
	l.metrics.CleanupError(op)
	if l.log != nil {
		l.log.Debug("store cleanup failed", "op", op, "err", err)
	}
}
