package control

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"rlproxy/internal/algo"
	"rlproxy/internal/config"
)

// maxReason bounds Request.Reason, in bytes.
const maxReason = 512

// newRecord validates r under cfg and builds the record it asks for,
// created at now by by.
func newRecord(r Request, by string, cfg *config.Config, now time.Time) (*record, error) {
	rec := &record{Policy: r.Policy, Action: r.Action, Plan: r.Plan, Reason: r.Reason, By: by,
		Limit: r.Limit, Window: r.Window, Rate: r.Rate, Burst: r.Burst, Created: now.UTC()}
	if err := checkText(r); err != nil {
		return nil, err
	}
	rec.PlanSet = r.Plan != ""
	spec, ok := keyedBy(cfg, r.Policy, rec.PlanSet)
	switch {
	case r.Policy == "":
		return nil, invalid("policy: required")
	case !ok && rec.PlanSet:
		return nil, invalid(fmt.Sprintf("policy: with plan, name a plan set; there is no plans.%s", r.Policy))
	case !ok:
		return nil, invalid(fmt.Sprintf("policy: no policy %q", r.Policy))
	case rec.PlanSet && cfg.Plans[r.Policy].Plans[r.Plan] == nil:
		return nil, invalid(fmt.Sprintf("plan: plan set %q has no plan %q", r.Policy, r.Plan))
	}
	var err error
	if rec.Source, rec.Client, err = resolveClient(spec, r.Source, r.Key, cfg); err != nil {
		return nil, err
	}
	if rec.Source != SourceIP && rec.Source != SourceCIDR {
		rec.Secret = secretPrint(cfg.Store.HashSecret)
	}
	if err := checkAction(rec, cfg); err != nil {
		return nil, err
	}
	if r.ExpiresIn != "" {
		d, err := time.ParseDuration(r.ExpiresIn)
		if err != nil || d <= 0 {
			return nil, invalid(fmt.Sprintf("expires_in: %q: want a positive duration such as 30m or 24h", r.ExpiresIn))
		}
		exp := rec.Created.Add(d)
		rec.Expires = &exp
	}
	return rec, nil
}

// checkText checks the request's free text.
func checkText(r Request) error {
	if len(r.Reason) > maxReason || !utf8.ValidString(r.Reason) {
		return invalid(fmt.Sprintf("reason: at most %d bytes of UTF-8", maxReason))
	}
	return nil
}

// checkAction checks the action and the fields it takes.
func checkAction(rec *record, cfg *config.Config) error {
	fields := rec.Limit != nil || rec.Window != "" || rec.Rate != "" || rec.Burst != nil
	switch rec.Action {
	case ActionBan, ActionExempt:
		if fields || rec.Plan != "" {
			return invalid(fmt.Sprintf("action %s takes no limit, window, rate, burst or plan", rec.Action))
		}
	case ActionOverride:
		if rec.PlanSet {
			if fields {
				return invalid("an override with plan takes no limit, window, rate or burst (the plan's policies have them)")
			}
			return nil
		}
		if !fields {
			return invalid("action override: set the policy's own fields (limit, window; or rate, burst) or a plan")
		}
		if _, err := overrideLimit(rec, cfg.Policies[rec.Policy]); err != nil {
			return invalid(err.Error())
		}
	default:
		return invalid(fmt.Sprintf("action: %q: want ban, exempt or override", rec.Action))
	}
	return nil
}

// overrideLimit is p's limit with rec's fields in place of its own: rate
// and burst for the buckets, limit and window for the windows (limit only
// with a calendar), limit for concurrency. A field the algorithm does not
// take is an error, as in the policy's YAML.
func overrideLimit(rec *record, p *config.Policy) (algo.Limit, error) {
	l := p.Limit
	a := algo.Describe(l.Kind)
	for _, f := range [...]struct {
		name string
		set  bool
	}{{"limit", rec.Limit != nil}, {"window", rec.Window != ""}, {"rate", rec.Rate != ""}, {"burst", rec.Burst != nil}} {
		if f.set && (!a.Has(f.name) || f.name == "window" && l.Calendar != nil) {
			return l, fmt.Errorf("field %q does not apply to policy %s (algorithm %s takes %s)", f.name, p.Name, a.Name, strings.Join(a.Fields, ", "))
		}
	}
	if rec.Rate != "" {
		c, per, err := config.ParseRate(rec.Rate)
		if err != nil {
			return l, fmt.Errorf("rate: %v", err)
		}
		l.Count, l.Period = c, per
	}
	if rec.Burst != nil {
		l.Burst = *rec.Burst
		l.Delay = min(l.Delay, l.Burst)
	}
	if rec.Limit != nil {
		l.Count = *rec.Limit
	}
	if rec.Window != "" {
		d, err := time.ParseDuration(rec.Window)
		if err != nil || d <= 0 || d%time.Millisecond != 0 {
			return l, fmt.Errorf("window: %q: want a positive whole number of milliseconds such as 10s", rec.Window)
		}
		l.Period = d.Milliseconds()
	}
	if l.Count < 1 || (a.Bucket && l.Burst < a.MinBurst) {
		return l, fmt.Errorf("limit and burst must be at least 1 (burst %d for %s)", a.MinBurst, a.Name)
	}
	if err := l.Validate(); err != nil {
		return l, err
	}
	return l, nil
}
