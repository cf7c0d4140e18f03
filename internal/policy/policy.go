// Package policy compiles a Config's routes, policies and plans into a
// Limiter, and decides each request against them: which route it takes, which
// store checks it needs, what the store said, and what happens when the store
// cannot answer (each policy's fail-open or fail-closed choice).
//
// It knows nothing of HTTP responses; package proxy turns a Result into one.
package policy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/clientkey"
	"rlproxy/internal/config"
	"rlproxy/internal/metrics"
	"rlproxy/internal/store"
	"rlproxy/internal/store/guard"
)

// Status is what happened to one policy on one request; its String is the
// `decision` label of rlproxy_requests_total (CONFIG-SPEC "Metrics contract").
type Status uint8

// Statuses, in the metrics contract's words.
const (
	Allowed        Status = iota // accepted, served at once
	Delayed                      // accepted, waits its turn (leaky bucket delay mode)
	Rejected                     // this policy refused
	NotCharged                   // another policy of the route refused
	DryRunRejected               // would have refused; dry run lets it pass
	StoreError                   // the store could not decide; the fail mode applied
)

var statusNames = [...]string{"allowed", "delayed", "rejected", "not_charged", "dry_run_rejected", "store_error"}

// String returns the status as the metrics label spells it ("allowed",
// "dry_run_rejected", ...).
func (s Status) String() string { return statusNames[s] }

// Outcome is the request-level verdict.
type Outcome uint8

// Outcomes.
const (
	Pass        Outcome = iota // forward (after Result.Wait)
	Refuse                     // answer Response.Status (429) with Retry-After
	Unavailable                // a fail-closed policy could not be decided: 503
)

// Policy is one compiled policy.
type Policy struct {
	config.Policy
	// HeaderName is the policy name as an RFC 8941 sf-string ("api" quoted),
	// ready for the RateLimit and RateLimit-Policy headers.
	HeaderName string
	// Quota is q (requests) and Window w (whole seconds, rounded up, ≥ 1) of
	// RateLimit-Policy, from the IETF httpapi ratelimit-headers draft.
	Quota  int64
	Window int64

	key     *clientkey.Extractor
	keyTail string // ":" + name + ":" + algorithm code: state is dropped when the algorithm changes
}

// Route is one compiled route.
type Route struct {
	// Name is the route's name from the configuration.
	Name string
	// Upstream is the name of the upstream the route forwards to.
	Upstream string
	// Cost is the requests each request charges to every policy (≥ 1).
	Cost int64
	// Policies apply to every request of the route, in route order.
	Policies []*Policy
	// Plans, when non-nil, adds the policies of the caller's plan.
	Plans *PlanSet

	match        config.Match
	counters     []*metrics.PolicyCounters          // parallel to Policies
	planCounters map[string]*metrics.PolicyCounters // plan policy name → counters
}

// Limited reports whether the route has any policy (and so sends quota headers).
func (r *Route) Limited() bool { return len(r.Policies) > 0 || r.Plans != nil }

// PlanSet is a compiled config.Plans: hashed credential → plan.
type PlanSet struct {
	Name     string
	key      *clientkey.Extractor
	byClient map[string]*plan // hashed client id → plan
	fallback *plan            // the default plan
}

type plan struct {
	name     string
	policies []*Policy
	// keyed reports whether the policies are keyed by the plan credential
	// (known credential) or by their own key spec (default plan).
	keyed bool
}

// Limiter decides requests for one compiled configuration. It is immutable
// and safe for concurrent use; reload builds a new one around the same store.
type Limiter struct {
	routes    []*Route
	policies  map[string]*Policy
	store     store.Store
	floor     store.Store // per-instance fallback limits while failing open
	prefix    string
	metrics   *metrics.Metrics
	counters  map[string]*metrics.PolicyCounters // "route\x00policy" → counters (plans)
	leaseSeq  atomic.Uint64
	leaseBase string
}

// Options are the collaborators of a Limiter.
type Options struct {
	// Store decides requests; Floor (a memory store) holds fallback limits
	// used while failing open. Neither is closed by the Limiter.
	Store, Floor store.Store
	// Metrics receives per-policy decisions; nil disables counting.
	Metrics *metrics.Metrics
	// LeasePrefix makes concurrency lease ids unique across instances.
	LeasePrefix string
}

// New compiles cfg. It fails only on what config validation cannot see
// (a key source that cannot be compiled).
func New(cfg *config.Config, opts Options) (*Limiter, error) {
	l := &Limiter{
		policies:  make(map[string]*Policy, len(cfg.Policies)),
		store:     opts.Store,
		floor:     opts.Floor,
		prefix:    cfg.Store.Valkey.KeyPrefix + "v1:",
		metrics:   opts.Metrics,
		counters:  map[string]*metrics.PolicyCounters{},
		leaseBase: opts.LeasePrefix,
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
			Window:     ceilSeconds(cp.Limit.WindowMillis()),
			key:        ex,
			keyTail:    ":" + name + ":" + kindCode(cp.Limit.Kind),
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
		rt := &Route{Name: cr.Name, Upstream: cr.Upstream, Cost: cr.Cost, match: cr.Match}
		if rt.Cost < 1 {
			rt.Cost = 1
		}
		for _, pn := range cr.Policies {
			p := l.policies[pn]
			rt.Policies = append(rt.Policies, p)
			rt.counters = append(rt.counters, l.countersFor(rt.Name, pn))
		}
		if cr.Plan != "" {
			rt.Plans = plans[cr.Plan]
			rt.planCounters = map[string]*metrics.PolicyCounters{}
			for _, pols := range cfg.Plans[cr.Plan].Plans {
				for _, pn := range pols {
					rt.planCounters[pn] = l.countersFor(rt.Name, pn)
				}
			}
		}
		l.routes = append(l.routes, rt)
	}
	return l, nil
}

func (l *Limiter) compilePlans(cp *config.Plans, cfg *config.Config) (*PlanSet, error) {
	ex, err := clientkey.New(cp.Key, cfg.JWT, cfg.Store.HashSecret)
	if err != nil {
		return nil, err
	}
	ps := &PlanSet{Name: cp.Name, key: ex, byClient: make(map[string]*plan, len(cp.Keys))}
	named := map[string]*plan{}
	for pname, pols := range cp.Plans {
		pl := &plan{name: pname, keyed: true}
		for _, pn := range pols {
			pl.policies = append(pl.policies, l.policies[pn])
		}
		named[pname] = pl
	}
	def := *named[cp.Default]
	def.keyed = false
	ps.fallback = &def
	for cred, pname := range cp.Keys {
		ids := ex.Credentials(cred)
		if len(ids) == 0 {
			return nil, errors.New("the plan key must be a header, query, cookie or jwt source (not combine, ip or global)")
		}
		for _, id := range ids {
			ps.byClient[id] = named[pname]
		}
	}
	return ps, nil
}

func (l *Limiter) countersFor(route, pol string) *metrics.PolicyCounters {
	if l.metrics == nil {
		return nil
	}
	k := route + "\x00" + pol
	c, ok := l.counters[k]
	if !ok {
		c = l.metrics.PolicyCounters(route, pol)
		l.counters[k] = c
	}
	return c
}

// Policy returns the compiled policy of that name, or nil.
func (l *Limiter) Policy(name string) *Policy { return l.policies[name] }

// Routes returns the compiled routes in match order.
func (l *Limiter) Routes() []*Route { return l.routes }

// Match returns the first route matching r (file order), or nil. Paths are
// matched in normalized form (MatchPath), as nginx matches locations.
func (l *Limiter) Match(r *http.Request) *Route {
	p := MatchPath(r.URL.Path)
	for _, rt := range l.routes {
		if rt.matches(r, p) {
			return rt
		}
	}
	return nil
}

// MatchPath is the request path routes are matched against: "." and ".."
// segments resolved and runs of slashes merged (nginx merge_slashes and its
// URI normalization, RFC 3986 section 5.2.4), a trailing slash kept. Without
// it "//login", "/./login" or "/x/../login" missed a limited /login route
// and reached the upstream unlimited, though most upstreams (nginx itself,
// many frameworks) serve them as /login. The request is still forwarded as
// sent, as nginx's proxy_pass without a URI does. Clean paths, the usual
// case, are returned as they are, without allocating.
func MatchPath(p string) string {
	if !strings.Contains(p, "//") && !strings.Contains(p, "/.") {
		return p
	}
	c := path.Clean("/" + p)
	if c != "/" && (strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..")) {
		c += "/"
	}
	return c
}

func (rt *Route) matches(r *http.Request, p string) bool {
	m := &rt.match
	if len(m.Methods) > 0 {
		ok := false
		for _, meth := range m.Methods {
			if meth == r.Method {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if m.Host != "" && !strings.EqualFold(hostOnly(r.Host), m.Host) {
		return false
	}
	if m.Path != "" && p != m.Path {
		return false
	}
	if m.PathPrefix != "" && !strings.HasPrefix(p, m.PathPrefix) {
		return false
	}
	if m.PathRegex != nil && !m.PathRegex.MatchString(p) {
		return false
	}
	return true
}

// hostOnly strips a port from a Host header value ("example.com:8080",
// "[::1]:80"), without allocating.
func hostOnly(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

// Item is one policy's part of a Result.
type Item struct {
	// Policy is the policy decided.
	Policy *Policy
	// Decision is the store's answer for Policy (zero when exempt).
	Decision algo.Decision
	// Status is how the request counts in Policy's metrics.
	Status   Status
	check    int // index into Result.checks, -1 when exempt
	counters *metrics.PolicyCounters
	floor    int // index into the floor checks, -1 when not on the floor
	// Unknown reports that the store could not say: no quota to report.
	Unknown bool
}

// Result is the verdict on one request. Reuse one per request; Decide resets it.
type Result struct {
	Outcome Outcome
	// Wait is how long to hold the request before forwarding (ms).
	Wait int64
	// RetryAfter is ms until a retry would be accepted (Refuse only): the
	// longest of the refusing policies' waits (CONFIG-SPEC).
	RetryAfter int64
	// Now is the decision time (Unix ms) the store used.
	Now int64
	// Items lists the route's policies in route order, then plan policies.
	Items []Item
	// Binding indexes Items: the policy with the fewest remaining requests,
	// then the longest reset; -1 when the route has no policy.
	Binding int
	// Err is the store error, when one occurred (the fail mode applied).
	Err error

	checks   []store.Check
	sorted   []store.Check // scratch for orderChecks and the floor
	dryStart int           // checks[dryStart:] are dry-run policies
	out      []algo.Decision
	keyBuf   []byte
	leases   bool // some check carries a concurrency lease id
	// held reports that the store granted the leases still named in checks
	// (a dry-run check whose lease was not granted has its Lease cleared), so
	// they must be renewed while the request runs and released after it.
	held bool
	// enforceFailed reports that the enforcing decision had a store error
	// (the fail modes decided); a store error on the dry-run decision alone
	// leaves the enforcing outcome standing.
	enforceFailed bool
	// charged, dryCharged and floorCharged report which decisions charged
	// (all their checks accepted): the enforcing checks at Now, the dry-run
	// checks at dryNow, the fallback floor (checks in sorted) at Now; Refund
	// undoes exactly those. refunded is set once Refund ran.
	charged, dryCharged, floorCharged, refunded bool
	dryNow                                      int64
}

func (res *Result) reset() {
	res.Outcome, res.Wait, res.RetryAfter, res.Now, res.Binding, res.Err = Pass, 0, 0, 0, -1, nil
	res.Items = res.Items[:0]
	res.checks = res.checks[:0]
	// failEnforcing leaves the floor checks in sorted; orderChecks appends
	// to it, so a pooled Result must not carry them into the next request
	// (it would decide the previous client's key).
	res.sorted = res.sorted[:0]
	res.out = res.out[:0]
	res.leases, res.held, res.enforceFailed = false, false, false
	res.charged, res.dryCharged, res.floorCharged, res.refunded, res.dryNow = false, false, false, false, 0
}

// ErrNoPolicy is returned by Decide for a route without policies.
var ErrNoPolicy = errors.New("route has no policy")

// Decide decides r (already matched to rt, from client address ip) and
// fills res. The returned error is only ever ErrNoPolicy: store failures are
// folded into res by each policy's fail mode (res.Err keeps the cause).
func (l *Limiter) Decide(ctx context.Context, rt *Route, r *http.Request, ip netip.Addr, res *Result) error {
	if err := l.collect(res, rt, r, ip); err != nil {
		return err
	}
	// Enforcing checks first, dry-run checks after: a dry-run refusal must
	// not stop the enforcing policies from charging.
	l.orderChecks(res, rt.Cost)
	if len(res.checks) == 0 { // every policy exempt
		return nil
	}
	l.decideChecks(ctx, res)
	l.finish(res)
	return nil
}

// Peek fills res with rt's policies' current state for r without charging
// anything (the quota endpoint).
func (l *Limiter) Peek(ctx context.Context, rt *Route, r *http.Request, ip netip.Addr, res *Result) error {
	if err := l.collect(res, rt, r, ip); err != nil {
		return err
	}
	l.orderChecks(res, 0)
	if len(res.checks) == 0 {
		return nil
	}
	now, err := l.store.Decide(ctx, res.checks, 0, res.out)
	if err != nil {
		res.Err = err
		return err
	}
	res.Now = now
	for i := range res.Items {
		it := &res.Items[i]
		if it.check >= 0 {
			it.Decision = res.out[it.check]
		}
	}
	res.pickBinding()
	return nil
}

// collect resets res and adds one item per route policy, then one per
// policy of the client's plan (the order Result.Items documents). It
// returns ErrNoPolicy for a route without policies.
func (l *Limiter) collect(res *Result, rt *Route, r *http.Request, ip netip.Addr) error {
	res.reset()
	if !rt.Limited() {
		return ErrNoPolicy
	}
	for i, p := range rt.Policies {
		l.addItem(res, p, rt.counters[i], r, ip, "")
	}
	if rt.Plans != nil {
		l.addPlan(res, rt, r, ip)
	}
	return nil
}

func (l *Limiter) addPlan(res *Result, rt *Route, r *http.Request, ip netip.Addr) {
	ps := rt.Plans
	res.keyBuf = ps.key.Key(res.keyBuf[:0], r, ip)
	pl, ok := ps.byClient[string(res.keyBuf)] // no allocation: map lookup by converted bytes
	cred := ""
	if ok {
		cred = string(res.keyBuf)
	} else {
		pl = ps.fallback
	}
	for _, p := range pl.policies {
		c := rt.planCounters[p.Name]
		if pl.keyed {
			l.addItem(res, p, c, r, ip, cred)
		} else {
			l.addItem(res, p, c, r, ip, "")
		}
	}
}

// addItem appends p's item and its store check; client, when non-empty, is
// the client id to use instead of p's own key (a known plan credential).
func (l *Limiter) addItem(res *Result, p *Policy, c *metrics.PolicyCounters, r *http.Request, ip netip.Addr, client string) {
	it := Item{Policy: p, check: -1, counters: c, floor: -1}
	for _, pfx := range p.Exempt {
		if pfx.Contains(ip) { // exempt: passes, not counted, no check
			res.Items = append(res.Items, it)
			return
		}
	}
	b := append(res.keyBuf[:0], l.prefix...)
	b = append(b, '{')
	if client != "" {
		b = append(b, client...)
	} else {
		b = p.key.Key(b, r, ip)
	}
	b = append(b, '}')
	b = append(b, p.keyTail...)
	res.keyBuf = b
	it.check = len(res.checks)
	res.checks = append(res.checks, store.Check{Key: string(b), Limit: p.Limit})
	res.Items = append(res.Items, it)
}

// orderChecks sets each check's cost and lease and moves dry-run checks
// after the enforcing ones, fixing Item.check indices; res.dryStart marks
// the split.
func (l *Limiter) orderChecks(res *Result, cost int64) {
	n := 0
	for pass := 0; pass < 2; pass++ {
		dry := pass == 1
		if dry {
			res.dryStart = n
		}
		for i := range res.Items {
			it := &res.Items[i]
			if it.check < 0 || it.Policy.DryRun != dry {
				continue
			}
			ck := res.checks[it.check]
			ck.Cost = cost
			if ck.Limit.Kind == algo.Concurrency {
				if cost > 0 {
					ck.Cost = 1
					ck.Lease = l.leaseBase + strconv.FormatUint(l.leaseSeq.Add(1), 36)
					res.leases = true
				}
			}
			res.out = append(res.out, algo.Decision{})
			res.sorted = append(res.sorted, ck)
			it.check = n
			n++
		}
	}
	res.checks, res.sorted = res.sorted, res.checks[:0]
}

// decideChecks asks the store (enforcing checks, then dry-run checks if the
// enforcing ones passed) and applies fail modes on store errors.
func (l *Limiter) decideChecks(ctx context.Context, res *Result) {
	enforce, dry := res.checks[:res.dryStart], res.checks[res.dryStart:]
	passed := true
	if len(enforce) > 0 {
		start := time.Now()
		now, err := l.store.Decide(ctx, enforce, 0, res.out[:res.dryStart])
		l.observeStore(ctx, start, err)
		if err != nil {
			res.Err, res.enforceFailed = err, true
			l.failEnforcing(ctx, res)
			return
		}
		res.Now = now
		for _, d := range res.out[:res.dryStart] {
			passed = passed && d.Allowed
		}
		res.charged = passed
	}
	// An accepted decision granted the enforcing checks' leases: whatever
	// happens to the dry-run checks, they must be released.
	res.held = passed
	if len(dry) == 0 {
		return
	}
	if !passed { // a refused request is charged by none
		for i := range res.out[res.dryStart:] {
			res.out[res.dryStart+i] = algo.Decision{Allowed: true, Remaining: -1}
		}
		return
	}
	start := time.Now()
	now, err := l.store.Decide(ctx, dry, 0, res.out[res.dryStart:])
	l.observeStore(ctx, start, err)
	for i := range dry { // dry-run leases exist only where the store accepted
		if err != nil || !res.out[res.dryStart+i].Allowed {
			dry[i].Lease = ""
		}
	}
	if err != nil {
		res.Err = err
		for i := range res.Items {
			if it := &res.Items[i]; it.check >= res.dryStart {
				it.Status = StoreError
				it.Unknown = true
			}
		}
		return
	}
	if res.Now == 0 {
		res.Now = now
	}
	res.dryNow, res.dryCharged = now, true
	for _, d := range res.out[res.dryStart:] {
		res.dryCharged = res.dryCharged && d.Allowed
	}
}

// observeStore records one store round trip of a decision made under ctx.
// A decision the circuit breaker answered without asking the store is no
// round trip: it is not timed or counted as a store error (the breaker has
// its own gauge). Nor is one whose caller gave up (ctx canceled: the
// client left before the store answered): it says nothing of the store's
// health, as for the breaker itself (guard.Breaker.Decide).
func (l *Limiter) observeStore(ctx context.Context, start time.Time, err error) {
	if l.metrics == nil || errors.Is(err, guard.ErrOpen) || (errors.Is(err, context.Canceled) && ctx.Err() != nil) {
		return
	}
	l.metrics.ObserveStore(time.Since(start))
	l.metrics.SetStoreUp(err == nil)
	if err != nil {
		l.metrics.StoreError()
	}
}

// failEnforcing applies each enforcing policy's fail mode after a store
// error: a fail-closed policy makes the request Unavailable; fail-open ones
// fall back to their per-instance floor (atomic among themselves), or pass.
func (l *Limiter) failEnforcing(ctx context.Context, res *Result) {
	floor := res.sorted[:0]
	for i := range res.Items {
		it := &res.Items[i]
		if it.check < 0 || it.check >= res.dryStart {
			continue
		}
		it.Status = StoreError
		it.Unknown = true
		l.metrics.StoreFallback(it.Policy.Name, metrics.FallbackMode(it.Policy.OnStoreError == config.FailClosed, it.Policy.Fallback != nil && l.floor != nil))
		switch {
		case it.Policy.OnStoreError == config.FailClosed:
			res.Outcome = Unavailable
		case it.Policy.Fallback != nil && l.floor != nil:
			ck := res.checks[it.check]
			ck.Limit = *it.Policy.Fallback
			it.floor = len(floor)
			floor = append(floor, ck)
		}
	}
	res.sorted = floor
	if res.Outcome == Unavailable || len(floor) == 0 {
		return
	}
	out := res.out[:len(floor)] // enforcing decisions are void; reuse
	now, err := l.floor.Decide(ctx, floor, 0, out)
	if err != nil { // the memory floor does not fail; pass as documented
		return
	}
	res.Now = now
	res.floorCharged = true
	for _, d := range out {
		res.floorCharged = res.floorCharged && d.Allowed
	}
	for i := range res.Items {
		it := &res.Items[i]
		if it.floor >= 0 && it.check >= 0 && it.check < res.dryStart {
			it.Decision = out[it.floor]
			it.Unknown = false
			if !it.Decision.Allowed {
				res.Outcome = Refuse
				res.RetryAfter = max(res.RetryAfter, it.Decision.RetryAfter)
			}
		}
	}
}

// finish derives statuses, the outcome, the wait and the binding policy,
// and counts each policy's decision.
func (l *Limiter) finish(res *Result) {
	if !res.enforceFailed {
		refused := false
		for i := range res.Items {
			it := &res.Items[i]
			if it.check < 0 || it.Unknown { // exempt, or a dry-run store error
				continue
			}
			it.Decision = res.out[it.check]
			if it.check < res.dryStart && !it.Decision.Allowed {
				refused = true
				res.RetryAfter = max(res.RetryAfter, it.Decision.RetryAfter)
			}
		}
		for i := range res.Items {
			it := &res.Items[i]
			if it.check < 0 || (it.Unknown && it.Status == StoreError) {
				continue
			}
			d := &it.Decision
			switch {
			case it.Policy.DryRun && refused:
				it.Status = NotCharged
			case it.Policy.DryRun && !d.Allowed:
				it.Status = DryRunRejected
			case !d.Allowed:
				it.Status = Rejected
			case refused:
				it.Status = NotCharged
			case d.Wait > 0:
				it.Status = Delayed
				if !it.Policy.DryRun { // nginx limit_req_dry_run: the rate is not enforced, nothing waits
					res.Wait = max(res.Wait, d.Wait)
				}
			default:
				it.Status = Allowed
			}
			if it.Policy.DryRun && d.Remaining < 0 { // never asked: refused before
				it.Unknown = true
			}
		}
		if refused {
			res.Outcome = Refuse
		}
	}
	res.pickBinding()
	for i := range res.Items {
		it := &res.Items[i]
		if it.check >= 0 && it.counters != nil {
			count(it.counters, it.Status)
		}
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

// pickBinding chooses the policy the legacy headers and the problem body
// describe: fewest remaining, then longest reset (CONFIG-SPEC).
func (res *Result) pickBinding() {
	res.Binding = -1
	for i := range res.Items {
		it := &res.Items[i]
		if it.check < 0 || it.Unknown {
			continue
		}
		if res.Binding < 0 {
			res.Binding = i
			continue
		}
		b := &res.Items[res.Binding].Decision
		d := &it.Decision
		if d.Remaining < b.Remaining || (d.Remaining == b.Remaining && d.ResetAfter > b.ResetAfter) {
			res.Binding = i
		}
	}
}

// Release ends the concurrency leases res holds (enforcing and dry-run);
// call it once the request is done with, whatever its fate after the
// decision: proxied, abandoned by the client, or refused while waiting.
func (l *Limiter) Release(res *Result) {
	if !res.HasLeases() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = l.store.Release(ctx, res.checks)
}

// Refund undoes the charges of res, a Pass decision that the proxy then
// refused itself: a shaping cap (server.max_wait, server.max_waiting) turned
// the wait the policies granted into a refusal, and a refused request is
// charged by none (CONFIG-SPEC). It refunds, at the time each was decided
// and with the cost charged, the enforcing checks (store.Store.Refund,
// concurrency leases included), the dry-run checks when their decision
// charged them, and the per-instance fallback floor when a store error
// made it decide; other requests' charges since are kept. It runs at most
// once per Result, on its own context (1 s), and is a no-op for any other
// outcome. Metrics: the policies counted the request when it was decided
// (delayed, as they decided) and Refund does not recount it; the caller
// counts the refusal itself (metrics.ShapingRefusal). A refund the store
// fails leaves that charge to expire like any other.
func (l *Limiter) Refund(res *Result) {
	if res.Outcome != Pass || res.refunded {
		return
	}
	res.refunded = true
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if res.charged {
		_ = l.store.Refund(ctx, res.checks[:res.dryStart], res.Now)
	}
	if res.dryCharged {
		_ = l.store.Refund(ctx, res.checks[res.dryStart:], res.dryNow)
	}
	if res.floorCharged && l.floor != nil {
		_ = l.floor.Refund(ctx, res.sorted, res.Now)
	}
}

// Refunded reports whether Refund undid res's charges (logs tell a request
// refused by a shaping cap from one served).
func (res *Result) Refunded() bool { return res.refunded }

// Renew refreshes the concurrency leases of a long-running request (SSE,
// WebSocket) so they do not expire while it runs.
func (l *Limiter) Renew(ctx context.Context, res *Result) {
	if !res.leases {
		return
	}
	// One decision per lease: a decision refuses as a whole, so one lease
	// that could not be renewed (it expired and its slot was taken) must not
	// stop the others from being refreshed.
	var out [1]algo.Decision
	for _, ck := range res.checks {
		if ck.Lease != "" {
			_, _ = l.store.Decide(ctx, []store.Check{ck}, 0, out[:])
		}
	}
}

// HasLeases reports whether res holds concurrency leases to renew and release.
// A dry-run store error does not void the enforcing checks' leases.
func (res *Result) HasLeases() bool { return res.leases && res.held && res.Outcome == Pass }

// LeaseRenewEvery is how often a request holding leases renews them: a
// third of the shortest lease (ms), so two renewals may fail before expiry.
func (res *Result) LeaseRenewEvery() time.Duration {
	var min int64
	for _, ck := range res.checks {
		if ck.Lease != "" && (min == 0 || ck.Limit.Period < min) {
			min = ck.Limit.Period
		}
	}
	return time.Duration(min/3) * time.Millisecond
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

// ceilSeconds converts ms to whole seconds rounded up, at least 1
// (CONFIG-SPEC: w, t and Retry-After).
func ceilSeconds(ms int64) int64 {
	if ms <= 0 {
		return 1
	}
	return (ms + 999) / 1000
}

func kindCode(k algo.Kind) string {
	switch k {
	case algo.FixedWindow:
		return "fw"
	case algo.SlidingLog:
		return "sl"
	case algo.SlidingWindow:
		return "sw"
	case algo.TokenBucket:
		return "tb"
	case algo.LeakyBucket:
		return "lb"
	case algo.Concurrency:
		return "cc"
	}
	return "x"
}

// KeyFor returns the store key of Items[i] (client ids derived from
// credentials are already hashed in it), or "" when it had no check.
func (res *Result) KeyFor(i int) string {
	if c := res.Items[i].check; c >= 0 {
		return res.checks[c].Key
	}
	return ""
}
