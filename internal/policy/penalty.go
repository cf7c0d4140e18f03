package policy

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"rlproxy/internal/algo"
	"rlproxy/internal/config"
	"rlproxy/internal/store"
)

// penaltyBox is a policy's compiled `penalty:`. Both parts are store
// state beside the policy's own key (fleet-wide with Valkey, per instance
// with memory): the refusals, a sliding log of `after` entries over
// `within` (key suffix ":pr"), and the box, a sliding log of one entry
// over `for` (":pb"): charged when the refusals fill, it refuses the
// client until its entry leaves.
type penaltyBox struct {
	refusals, box algo.Limit
	started       prometheus.Counter // rlproxy_penalties_total{policy}
}

// Key suffixes of a policy's penalty state.
const (
	refusalsSuffix = ":pr"
	boxSuffix      = ":pb"
)

func newPenaltyBox(pe *config.Penalty, started prometheus.Counter) *penaltyBox {
	if pe == nil {
		return nil
	}
	return &penaltyBox{
		refusals: algo.Limit{Kind: algo.SlidingLog, Count: int64(pe.After), Period: pe.Within.Milliseconds()},
		box:      algo.Limit{Kind: algo.SlidingLog, Count: 1, Period: pe.For.Milliseconds()},
		started:  started,
	}
}

// boxes looks up, before the decision, whether the client is in the
// penalty box of each item's policy that has one (one store decision for
// all, peeking): a client in one is refused as a ban refuses (nothing is
// charged; under dry_run it only counts), for the time the box has left.
// A store error leaves the boxes unknown and the decision to the limits.
func (l *Limiter) boxes(ctx context.Context, res *Result) {
	res.boxChecks, res.boxItems = res.boxChecks[:0], res.boxItems[:0]
	for i := range res.Items {
		it := &res.Items[i]
		if it.Policy.penalty == nil || it.stage == noStage {
			continue
		}
		key := res.stages[it.stage].checks[it.check].Key
		res.boxChecks = append(res.boxChecks, store.Check{Key: key + boxSuffix, Limit: it.Policy.penalty.box})
		res.boxItems = append(res.boxItems, i)
	}
	if len(res.boxChecks) == 0 {
		return
	}
	res.boxOut = res.boxOut[:0]
	for range res.boxChecks {
		res.boxOut = append(res.boxOut, algo.Decision{})
	}
	if _, err := l.store.Decide(ctx, res.boxChecks, l.decideAt(), res.boxOut); err != nil {
		return
	}
	for j, i := range res.boxItems {
		if d := res.boxOut[j]; d.Remaining <= 0 {
			it := &res.Items[i]
			ck := &res.stages[it.stage].checks[it.check]
			ck.Cost, it.key = 0, ck.Key // a dry run's check only peeks
			it.stage = noStage
			l.refuseItem(res, it, RefusedPenalty, d.ResetAfter)
		}
	}
}

// countRefusals counts, after the decision, each refusal by a policy with
// a penalty box (its dry-run refusals too), and puts the client in the box
// when the refusals fill: the refusal that fills them starts the penalty.
// A client in the box was refused before the store (boxes), so a running
// penalty is never counted and does not extend itself.
func (l *Limiter) countRefusals(ctx context.Context, res *Result) {
	for i := range res.Items {
		it := &res.Items[i]
		pb := it.Policy.penalty
		if pb == nil || it.Refused != NotRefused || (it.Status != Rejected && it.Status != DryRunRejected) {
			continue
		}
		key := res.stages[it.stage].checks[it.check].Key
		if d, err := l.decideOne(ctx, res, store.Check{Key: key + refusalsSuffix, Limit: pb.refusals, Cost: 1}); err != nil || d.Allowed && d.Remaining > 0 {
			continue
		}
		if d, err := l.decideOne(ctx, res, store.Check{Key: key + boxSuffix, Limit: pb.box, Cost: 1}); err != nil || !d.Allowed {
			continue
		}
		pb.started.Inc()
		if l.log != nil { // the client is not named: the refusal log names it as the admin page shows it
			l.log.Info("penalty box: a client is refused for the penalty's duration", "policy", it.Policy.Name,
				"for_ms", pb.box.Period, "dry_run", it.Policy.DryRun)
		}
	}
}

// decideOne decides ck alone on the store, in res's scratch (no
// allocation once it has grown).
func (l *Limiter) decideOne(ctx context.Context, res *Result, ck store.Check) (algo.Decision, error) {
	res.boxChecks = append(res.boxChecks[:0], ck)
	res.boxOut = append(res.boxOut[:0], algo.Decision{})
	_, err := l.store.Decide(ctx, res.boxChecks, l.decideAt(), res.boxOut)
	return res.boxOut[0], err
}
