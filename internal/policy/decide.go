package policy

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/clientkey"
	"rlproxy/internal/config"
	"rlproxy/internal/control"
	"rlproxy/internal/metrics"
	"rlproxy/internal/reqview"
	"rlproxy/internal/store"
	"rlproxy/internal/store/guard"
)

// ErrNoPolicy is returned by Decide for a route without policies.
var ErrNoPolicy = errors.New("route has no policy")

// Decide decides request v (already matched to rt, from client address ip) and
// fills res. The returned error is only ever ErrNoPolicy: store failures are
// folded into res by each policy's fail mode (res.Err keeps the cause).
//
// The enforcing policies are decided first, the dry-run ones after and only
// if the enforcing ones accepted: a dry-run refusal must not stop the
// enforcing policies from charging, and a refused request is charged by
// none. When the store fails the enforcing decision, the fail modes decide
// (failEnforcing).
func (l *Limiter) Decide(ctx context.Context, rt *Route, v *reqview.View, ip netip.Addr, res *Result) error {
	if err := l.collect(res, rt, v, ip, rt.Cost); err != nil {
		return err
	}
	l.boxes(ctx, res)
	l.decideCollected(ctx, res)
	l.countRefusals(ctx, res)
	return nil
}

// decideCollected decides the checks collected into res (Decide's and
// DecideKeyed's common part).
func (l *Limiter) decideCollected(ctx context.Context, res *Result) {
	if res.refused {
		l.finishRefused(res)
		return
	}
	en, dry := &res.stages[stageEnforce], &res.stages[stageDryRun]
	if len(en.checks)+len(dry.checks) == 0 { // every policy exempt
		return
	}
	if len(en.checks) > 0 {
		l.ask(ctx, en, false)
		if en.err != nil {
			res.Err = en.err
			l.failEnforcing(ctx, res)
			l.finish(res)
			return
		}
	}
	if len(dry.checks) > 0 && (len(en.checks) == 0 || en.charged) {
		l.ask(ctx, dry, false)
		if dry.err != nil {
			res.Err = dry.err
		}
	}
	l.finish(res)
}

// Peek fills res with rt's policies' current state for request v without charging
// anything (the quota endpoint). It returns the store's error, if any.
func (l *Limiter) Peek(ctx context.Context, rt *Route, v *reqview.View, ip netip.Addr, res *Result) error {
	if err := l.collect(res, rt, v, ip, 0); err != nil {
		return err
	}
	for _, s := range [...]stage{stageEnforce, stageDryRun} {
		if d := &res.stages[s]; len(d.checks) > 0 {
			if l.ask(ctx, d, false); d.err != nil {
				res.Err = d.err
				return d.err
			}
		}
	}
	res.Now = res.decidedAt()
	for i := range res.Items {
		if it := &res.Items[i]; it.stage != noStage {
			it.Decision = res.stages[it.stage].out[it.check]
		}
	}
	res.pickBinding()
	return nil
}

// collect resets res and adds one item per route policy, then one per
// policy of the client's plan (the order Result.Items documents), each
// with its check of cost in its stage. It returns ErrNoPolicy for a route
// without policies.
func (l *Limiter) collect(res *Result, rt *Route, v *reqview.View, ip netip.Addr, cost int64) error {
	res.reset(cost)
	if !rt.Limited() {
		return ErrNoPolicy
	}
	for i, p := range rt.Policies {
		l.addItem(res, p, rt.counters[i], v, ip, nil)
	}
	if rt.Plans != nil {
		l.addPlan(res, rt, v, ip)
	}
	return nil
}

// addPlan adds the items of the client's plan: a control entry's plan
// (control.PlanTable), else a known credential's plan, both keyed by the
// credential's id when there is one (copied to res.credBuf: addItem reuses
// keyBuf), or the default plan, keyed by each policy's own key.
func (l *Limiter) addPlan(res *Result, rt *Route, v *reqview.View, ip netip.Addr) {
	ps := rt.Plans
	var sum clientkey.Sum
	var ok bool
	res.keyBuf, sum, ok = ps.key.CredentialKey(res.keyBuf[:0], v, ip)
	pols, cred := ps.fallback, []byte(nil)
	res.plan, res.credential = ps.fallName, false
	i, known := -1, false
	if ok {
		if n, in := ps.index.lookup(sum); in {
			i, known = int(n), true
		}
	}
	if r := l.find(l.control.PlanTable(ps.Name), res.keyBuf, ip); r != nil && r.Plan != "" {
		i, known = slices.Index(ps.names, r.Plan), ok // an entry's plan first; keyed by the credential, if any
	}
	if i >= 0 {
		pols, res.plan = ps.plans[i], ps.names[i]
	}
	if known {
		res.credBuf = append(res.credBuf[:0], res.keyBuf...)
		cred, res.credential = res.credBuf, true
	}
	for _, p := range pols {
		l.addItem(res, p, rt.planCounters[p.Name], v, ip, cred)
	}
}

// addItem appends p's item and its check, in the enforcing or the dry-run
// stage; client, when non-empty, is the client id to use instead of p's
// own key (a known plan credential). A concurrency check of a charging
// decision takes one lease, whatever the cost. The client's control entry
// (control.Table.Find) comes first: ban > API exempt > config exempt >
// override > the configured limit.
func (l *Limiter) addItem(res *Result, p *Policy, c *metrics.PolicyCounters, v *reqview.View, ip netip.Addr, client []byte) {
	it := Item{Policy: p, counters: c}
	b := append(res.keyBuf[:0], l.prefix...)
	b = append(b, '{')
	start := len(b)
	if len(client) > 0 {
		b = append(b, client...)
	} else {
		b = p.key.Key(b, v, ip)
	}
	rule := l.find(l.control.Table(p.Name), b[start:], ip)
	switch {
	case rule != nil && rule.Action == control.ActionBan:
		b = append(b, '}')
		b = append(b, p.keyTail...)
		res.keyBuf, it.key = b, l.keys.String(b) // the refusal log and the admin page name the client
		l.addRefused(res, it, RefusedBan, rule.Left(l.nowMillis()))
		return
	case rule != nil && rule.Action == control.ActionExempt || exempt(p, ip): // passes, not counted, no check
		res.keyBuf = b
		res.Items = append(res.Items, it)
		return
	case rule != nil && rule.HasLimit:
		it.Policy = l.overridden(p, rule)
	}
	b = append(b, '}')
	b = append(b, p.keyTail...)
	res.keyBuf = b
	ck := store.Check{Key: l.keys.String(b), Limit: it.Policy.Limit, Cost: res.cost, Allot: p.allot}
	if p.Limit.Kind == algo.Concurrency && res.cost > 0 {
		ck.Cost = 1
		ck.Lease = l.leaseBase + strconv.FormatUint(l.leaseSeq.Add(1), 36)
	}
	it.stage = stageEnforce
	if p.DryRun {
		it.stage = stageDryRun
	}
	it.check = res.stages[it.stage].add(ck)
	res.Items = append(res.Items, it)
}

// exempt reports whether ip is in p's `exempt:` prefixes.
func exempt(p *Policy, ip netip.Addr) bool {
	for _, pfx := range p.Exempt {
		if pfx.Contains(ip) {
			return true
		}
	}
	return false
}

// ask runs d's checks as one decision, on the store or (onFloor) on the
// fallback floor, and records the answer.
func (l *Limiter) ask(ctx context.Context, d *decision, onFloor bool) {
	if onFloor {
		at, err := l.floor.Decide(ctx, d.checks, l.decideAt(), d.out)
		d.record(at, err)
		return
	}
	start := l.now()
	at, err := l.store.Decide(ctx, d.checks, l.decideAt(), d.out)
	l.observeStore(ctx, start, err)
	d.record(at, err)
}

// decideAt is the now argument of store decisions: 0 (the store's own
// clock) unless Options.Now injected time.
func (l *Limiter) decideAt() int64 {
	if !l.injected {
		return 0
	}
	return l.now().UnixMilli()
}

// observeStore records one store round trip of a decision made under ctx.
// A decision the circuit breaker answered without asking the store is no
// round trip: it is not timed (the breaker has its own gauge). Nor is one
// whose caller gave up (ctx canceled: the client left before the store
// answered): it says nothing of the store's health, as for the breaker
// itself (guard.Breaker.Decide). Failed round trips are counted by the
// store itself (rlproxy_store_errors_total, through
// valkey.Options.OnRoundTrip: a batch is one round trip).
func (l *Limiter) observeStore(ctx context.Context, start time.Time, err error) {
	if errors.Is(err, guard.ErrOpen) || (errors.Is(err, context.Canceled) && ctx.Err() != nil) {
		return
	}
	l.metrics.ObserveStore(l.now().Sub(start))
	l.metrics.SetStoreUp(err == nil)
}

// failEnforcing applies each enforcing policy's fail mode after the store
// failed the enforcing decision: a fail-closed policy makes the request
// Unavailable; fail-open ones fall back to their per-instance floor (one
// decision, atomic among themselves), or pass. The dry-run policies were
// not asked: the store that failed would have decided them too.
func (l *Limiter) failEnforcing(ctx context.Context, res *Result) {
	en, fl := &res.stages[stageEnforce], &res.stages[stageFloor]
	for i := range res.Items {
		it := &res.Items[i]
		if it.stage == noStage {
			continue
		}
		it.Status, it.Unknown = StoreError, true
		if it.stage == stageEnforce {
			l.metrics.StoreFallback(it.Policy.Name, metrics.FallbackMode(it.Policy.OnStoreError == config.FailClosed, it.Policy.Fallback != nil && l.floor != nil))
		}
		switch {
		case it.stage != stageEnforce:
		case it.Policy.OnStoreError == config.FailClosed:
			res.Outcome = Unavailable
		case it.Policy.Fallback != nil && l.floor != nil:
			ck := en.checks[it.check]
			ck.Limit, ck.Lease = *it.Policy.Fallback, ""
			it.stage, it.check = stageFloor, fl.add(ck)
		}
	}
	if res.Outcome == Unavailable || len(fl.checks) == 0 {
		return
	}
	if l.ask(ctx, fl, true); fl.err != nil { // the memory floor does not fail; pass as documented
		return
	}
	for i := range res.Items {
		if it := &res.Items[i]; it.stage == stageFloor {
			it.Decision, it.Unknown = fl.out[it.check], false
			if !it.Decision.Allowed {
				res.Outcome = Refuse
				res.RetryAfter = max(res.RetryAfter, it.Decision.RetryAfter)
			}
		}
	}
}

// finish derives statuses, the outcome and the wait from the decisions
// (unless the fail modes decided), picks the binding policy, and counts
// each policy's decision.
func (l *Limiter) finish(res *Result) {
	res.Now = res.decidedAt()
	if res.stages[stageEnforce].err == nil {
		res.statuses()
	}
	res.pickBinding()
	l.countItems(res)
}

// countItems counts each decided policy's status (an exempt one is not
// counted).
func (l *Limiter) countItems(res *Result) {
	for i := range res.Items {
		if it := &res.Items[i]; it.stage != noStage || it.Refused != NotRefused {
			count(it.counters, it.Status)
		}
	}
}

// decidedAt is the instant of the decision the headers describe: the
// enforcing one, else the floor's, else the dry-run one's.
func (res *Result) decidedAt() int64 {
	for _, s := range [...]stage{stageEnforce, stageFloor, stageDryRun} {
		if d := &res.stages[s]; d.asked {
			return d.at
		}
	}
	return 0
}

// statuses sets each item's decision and status from the store's answers,
// and the request's outcome, retry and wait: any enforcing refusal refuses
// (the others are not charged); a dry-run refusal only counts.
func (res *Result) statuses() {
	refused := false
	for i := range res.Items {
		it := &res.Items[i]
		if d := &res.stages[it.stage]; it.stage != noStage && d.asked {
			it.Decision = d.out[it.check]
			if it.stage == stageEnforce && !it.Decision.Allowed {
				refused = true
				res.RetryAfter = max(res.RetryAfter, it.Decision.RetryAfter)
			}
		}
	}
	for i := range res.Items {
		it := &res.Items[i]
		if it.stage == noStage {
			continue
		}
		d, dec := &res.stages[it.stage], &it.Decision
		switch {
		case d.err != nil: // the dry-run decision alone failed
			it.Status, it.Unknown = StoreError, true
		case !d.asked: // a dry-run policy, not asked: the enforcing ones refused
			it.Status, it.Unknown = NotCharged, true
		case it.Policy.DryRun && !dec.Allowed:
			it.Status = DryRunRejected
		case !dec.Allowed:
			it.Status = Rejected
		case refused:
			it.Status = NotCharged
		case dec.Wait > 0:
			it.Status = Delayed
			if !it.Policy.DryRun { // nginx limit_req_dry_run: the rate is not enforced, nothing waits
				res.Wait = max(res.Wait, dec.Wait)
			}
		default:
			it.Status = Allowed
		}
	}
	if refused {
		res.Outcome = Refuse
	}
}

func count(c *metrics.PolicyCounters, s Status) {
	switch s {
	case Allowed:
		c.Allowed.Inc()
	case Delayed:
		c.Delayed.Inc()
	case Rejected:
		c.Rejected.Inc()
	case NotCharged:
		c.NotCharged.Inc()
	case DryRunRejected:
		c.DryRunRejected.Inc()
	case StoreError:
		c.StoreError.Inc()
	}
}
