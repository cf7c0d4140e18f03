package policy

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/clientkey"
	"rlproxy/internal/config"
	"rlproxy/internal/intern"
	"rlproxy/internal/metrics"
	"rlproxy/internal/store"
)

// New compiles cfg. It fails only on what config validation cannot see
// (a key source that cannot be compiled).
func New(cfg *config.Config, opts Options) (*Limiter, error) {
	l := &Limiter{
		policies:  make(map[string]*Policy, len(cfg.Policies)),
		store:     opts.Store,
		floor:     opts.Floor,
		prefix:    cfg.Store.Valkey.KeyPrefix + store.KeyVersion,
		metrics:   opts.Metrics,
		counters:  map[string]*metrics.PolicyCounters{},
		leaseBase: opts.LeasePrefix,
		now:       opts.Now,
		log:       opts.Log,
		control:   opts.Control,
		keys:      intern.New(),
	}
	if l.metrics == nil {
		l.metrics = metrics.Discard()
	}
	if l.injected = l.now != nil; !l.injected {
		l.now = time.Now
	}
	var pk *partitionKey
	if cfg.Response.PartitionKey {
		pk = newPartitionKey(cfg.Store.HashSecret)
	}
	for _, name := range cfg.PolicyOrder {
		cp := cfg.Policies[name]
		ex, err := clientkey.New(cp.Key, cfg.JWT, cfg.Store.HashSecret)
		if err != nil {
			return nil, fmt.Errorf("compiling policy %q key: %w", name, err)
		}
		l.policies[name] = &Policy{
			Policy:     *cp,
			HeaderName: sfString(name),
			Quota:      cp.Limit.Quota(),
			Window:     CeilSeconds(cp.Limit.WindowMillis()),
			key:        ex,
			keyTail:    ":" + name + ":" + kindCode(&cp.Limit),
			pk:         pk,
			allot:      storeAllotment(name, cp),
			penalty:    newPenaltyBox(cp.Penalty, l.metrics.Penalties(name)),
		}
	}
	plans := map[string]*PlanSet{}
	for name, cp := range cfg.Plans {
		ps, err := l.compilePlans(cp, cfg)
		if err != nil {
			return nil, fmt.Errorf("compiling plans %q: %w", name, err)
		}
		plans[name] = ps
	}
	for _, cr := range cfg.Routes {
		l.routes = append(l.routes, l.compileRoute(cr, cfg, plans))
	}
	l.mappingCounters(cfg)
	return l, nil
}

// compileRoute compiles one route of cfg; its policies and plans are
// already compiled.
func (l *Limiter) compileRoute(cr *config.Route, cfg *config.Config, plans map[string]*PlanSet) *Route {
	rt := &Route{Name: cr.Name, Upstream: cr.Upstream, Cost: max(cr.Cost, 1), match: cr.Match,
		CostResponseHeader: cr.CostResponseHeader, settles: cr.CostResponseHeader != ""}
	for _, pn := range cr.Policies {
		p := l.policies[pn]
		rt.Policies = append(rt.Policies, p)
		rt.counters = append(rt.counters, l.countersFor(rt.Name, pn))
		rt.settles = rt.settles || p.CountStatus != nil
		rt.addKey(p.key)
	}
	if cr.Plan != "" {
		rt.Plans = plans[cr.Plan]
		rt.addKey(rt.Plans.key)
		rt.planCounters = map[string]*metrics.PolicyCounters{}
		for _, pols := range cfg.Plans[cr.Plan].Plans {
			for _, pn := range pols {
				rt.planCounters[pn] = l.countersFor(rt.Name, pn)
				rt.settles = rt.settles || l.policies[pn].CountStatus != nil
				rt.addKey(l.policies[pn].key)
			}
		}
	}
	return rt
}

// addKey adds k to the key specs Doubled checks, once.
func (r *Route) addKey(k *clientkey.Extractor) {
	if !slices.Contains(r.keys, k) {
		r.keys = append(r.keys, k)
	}
}

// compilePlans compiles cp: its plans, numbered in name order, and the
// index of every credential's hashed ids (one per credential source).
func (l *Limiter) compilePlans(cp *config.Plans, cfg *config.Config) (*PlanSet, error) {
	if cp.Keys == nil {
		return nil, errors.New("its credentials were released (config.Config.ReleaseKeys): compile before releasing")
	}
	ex, err := clientkey.New(cp.Key, cfg.JWT, cfg.Store.HashSecret)
	if err != nil {
		return nil, err
	}
	ps := &PlanSet{Name: cp.Name, key: ex}
	number := map[string]uint32{}
	for _, pname := range slices.Sorted(maps.Keys(cp.Plans)) {
		var pols []*Policy
		for _, pn := range cp.Plans[pname] {
			pols = append(pols, l.policies[pn])
		}
		number[pname] = uint32(len(ps.plans))
		ps.plans = append(ps.plans, pols)
		ps.names = append(ps.names, pname)
	}
	ps.fallback, ps.fallName = ps.plans[number[cp.Default]], cp.Default
	var sums []clientkey.Sum
	var entries []planEntry
	for cred, pname := range cp.Keys.All() {
		if sums = ex.Credentials(sums[:0], cred); len(sums) == 0 {
			return nil, errors.New("the plan key must be a header, query, cookie or jwt source (not combine, ip or global)")
		}
		if entries == nil { // sized once: growing it would leave garbage as big
			if n := cp.Keys.Len() * len(sums); n > math.MaxUint32 {
				return nil, fmt.Errorf("%d credential ids: more than the index holds (%d)", n, uint32(math.MaxUint32))
			}
			entries = make([]planEntry, 0, cp.Keys.Len()*len(sums))
		}
		for _, s := range sums {
			entries = append(entries, planEntry{sum: s, plan: number[pname]})
		}
	}
	ps.index = newPlanIndex(entries)
	return ps, nil
}

func (l *Limiter) countersFor(route, pol string) *metrics.PolicyCounters {
	k := route + "\x00" + pol
	c, ok := l.counters[k]
	if !ok {
		c = l.metrics.PolicyCounters(route, pol)
		l.counters[k] = c
	}
	return c
}

// sfString quotes s as an RFC 8941 sf-string (the ratelimit-headers draft
// names policies with one).
func sfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		if c < 0x20 || c > 0x7e {
			c = '_'
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}

// CeilSeconds converts a duration in ms to whole seconds rounded up, at
// least 1: RateLimit-Policy's w and Retry-After's delay-seconds (RFC 9110
// section 10.2.3), which are never 0 (docs/CONTRACT.md). A reset (t, which
// may be 0) is rounded by package proxy's resetSeconds instead.
func CeilSeconds(ms int64) int64 {
	if ms <= 0 {
		return 1
	}
	return (ms + 999) / 1000
}

// WindowAt is w of RateLimit-Policy in seconds at now (Unix ms): Window,
// or for a calendar window the length of the period containing now (a
// 23 h day is 82800).
func (p *Policy) WindowAt(now int64) int64 {
	if p.Limit.Calendar == nil {
		return p.Window
	}
	return CeilSeconds(p.Limit.WindowMillisAt(now))
}

// kindCode is the key's algorithm code (algo.Algorithm.Code). A calendar
// window's adds "c" and its unit (fcm: fixed window per calendar month),
// and its state is keyed
// by the period's start instant: switching window and calendar, the unit
// or the zone on reload never reads another period's count.
func kindCode(l *algo.Limit) string {
	if l.Calendar != nil {
		return kindCode(&algo.Limit{Kind: l.Kind})[:1] + "c" + l.Calendar.Unit.String()[:1]
	}
	if a := algo.Describe(l.Kind); a != nil {
		return a.Code
	}
	return "x"
}

// storeAllotment is the Allotment the checks of policy name carry (an
// allotment layer decides them from slices), nil when it has none or is
// a dry run: a dry run's would-be refusals stay exact store decisions.
func storeAllotment(name string, cp *config.Policy) *store.Allotment {
	a := cp.Allotment
	if a == nil || cp.DryRun {
		return nil
	}
	return &store.Allotment{Policy: name, MaxFraction: max(int64(math.Round(a.MaxFraction*1000)), 1), TTL: a.TTL.Milliseconds()}
}
