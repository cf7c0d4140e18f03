package policy

import (
	"net/netip"

	"rlproxy/internal/algo"
	"rlproxy/internal/control"
)

// Refusal says why a policy refused a client before any store decision.
type Refusal uint8

// Refusals.
const (
	NotRefused     Refusal = iota // decided by the policy's limit (or exempt)
	RefusedBan                    // a control entry bans the client
	RefusedPenalty                // the client is in the policy's penalty box
)

// banWithoutExpiry is the Retry-After (ms) of a ban that never expires:
// a day, so a client retrying as told asks rarely.
const banWithoutExpiry = 86_400_000

// find returns the control rule of the client with id and address ip in
// t, nil when t holds none (no clock is read then).
func (l *Limiter) find(t *control.Table, id []byte, ip netip.Addr) *control.Rule {
	if t.Len() == 0 {
		return nil
	}
	return t.Find(id, ip, l.nowMillis())
}

// nowMillis is the policy layer's clock in Unix ms.
func (l *Limiter) nowMillis() int64 { return l.now().UnixMilli() }

// overridden is p with the override rule r's limit: its own quota and
// window, so the quota headers show the limit in force. One copy per
// rule and Limiter (a reload builds a new Limiter, whose policies may
// differ), made on the rule's first request.
func (l *Limiter) overridden(p *Policy, r *control.Rule) *Policy {
	if v, ok := l.overrides.Load(r); ok {
		return v.(*Policy)
	}
	np := *p
	np.Limit = r.Limit
	np.Quota = r.Limit.Quota()
	np.Window = CeilSeconds(r.Limit.WindowMillis())
	v, _ := l.overrides.LoadOrStore(r, &np)
	return v.(*Policy)
}

// addRefused appends it, refused for why before any store decision for
// left ms (-1: no end): no check is sent.
func (l *Limiter) addRefused(res *Result, it Item, why Refusal, left int64) {
	l.refuseItem(res, &it, why, left)
	res.Items = append(res.Items, it)
}

// refuseItem refuses it for why for left ms (-1: no end) before any store
// decision. A dry-run policy only counts the refusal.
func (l *Limiter) refuseItem(res *Result, it *Item, why Refusal, left int64) {
	if left < 0 {
		left = banWithoutExpiry
	}
	it.Refused = why
	it.Decision = algo.Decision{Allowed: false, Remaining: 0, ResetAfter: left, RetryAfter: left}
	if it.Policy.DryRun {
		it.Status = DryRunRejected
		return
	}
	it.Status = Rejected
	res.refused = true
	res.RetryAfter = max(res.RetryAfter, left)
}

// finishRefused finishes a decision a ban or a penalty refused: no store
// is asked, so the other policies are not charged.
func (l *Limiter) finishRefused(res *Result) {
	res.Outcome, res.Now = Refuse, l.nowMillis()
	for i := range res.Items {
		if it := &res.Items[i]; it.Refused == NotRefused && it.stage != noStage {
			it.Status, it.Unknown = NotCharged, true
		}
	}
	res.pickBinding()
	l.countItems(res)
}
