package policy

import (
	"context"
	"net/netip"

	"rlproxy/internal/algo"
	"rlproxy/internal/config"
	"rlproxy/internal/metrics"
)

// Keyed is one policy to decide for an explicit client id instead of a key
// read from a request: an Envoy rate limit descriptor's values.
type Keyed struct {
	Policy *Policy
	// Counters count the decision (Counters of the mapping and policy).
	Counters *metrics.PolicyCounters
	// Client is the client id; it replaces the policy's key spec.
	Client string
	// Cost is the requests charged (≥ 1; Envoy's hits_addend).
	Cost int64
}

// Counters returns the metrics of policy on an envoy_rls mapping named
// route (registered by New).
func (l *Limiter) Counters(route, policy string) *metrics.PolicyCounters {
	return l.counters[route+"\x00"+policy]
}

// mappingCounters registers the counters of every envoy_rls mapping's
// policies, labelled route=mapping name, so that reading them at decision
// time never writes the map.
func (l *Limiter) mappingCounters(cfg *config.Config) {
	for _, m := range cfg.EnvoyRLS.Mappings {
		for _, pn := range m.Policies {
			l.countersFor(m.Name, pn)
		}
	}
}

// DecideKeyed decides ks into res as one atomic decision, as a route's
// policies are: every check is charged, or none (a refusal by one refuses
// all). Fail modes, fallback floors, dry runs and metrics are Decide's;
// res.Items follow ks, one each. Exemptions by client address do not
// apply: there is no client address.
func (l *Limiter) DecideKeyed(ctx context.Context, ks []Keyed, res *Result) {
	res.reset(1)
	for _, k := range ks {
		res.credBuf = append(res.credBuf[:0], k.Client...)
		l.addItem(res, k.Policy, k.Counters, nil, netip.Addr{}, res.credBuf)
	}
	for i := range res.Items {
		it := &res.Items[i]
		if it.stage == noStage { // exempt or refused by a control entry
			continue
		}
		if ck := &res.stages[it.stage].checks[it.check]; ck.Limit.Kind != algo.Concurrency {
			ck.Cost = max(ks[i].Cost, 1)
		}
	}
	l.boxes(ctx, res)
	l.decideCollected(ctx, res)
	l.countRefusals(ctx, res)
}
