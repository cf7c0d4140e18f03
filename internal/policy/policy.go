// Package policy compiles a Config's routes, policies and plans into a
// Limiter, and decides each request against them: which route it takes, which
// store checks it needs, what the store said, and what happens when the store
// cannot answer (each policy's fail-open or fail-closed choice).
//
// A request's life in this package is a sequence of explicit steps, each
// reading and extending one Result:
//
//	Match → Decide → (Result.Wait) → forward → Settle → Release
//
// Decide records in the Result what it did, per store decision (the
// enforcing policies on the store, the dry-run policies on the store, the
// fail-open floor after a store error): the checks sent, the instant the
// store decided at, the cost and leases charged. Refund, Settle, Release
// and Renew undo or extend exactly what that record says.
//
// The files follow the steps: compile.go (New), match.go (Match),
// decide.go (Decide, Peek, fail modes), result.go (the record), settle.go
// (Settle, Refund, Release, Renew). It knows nothing of HTTP responses; package
// proxy turns a Result into one.
package policy

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"rlproxy/internal/clientkey"
	"rlproxy/internal/config"
	"rlproxy/internal/control"
	"rlproxy/internal/intern"
	"rlproxy/internal/metrics"
	"rlproxy/internal/reqview"
	"rlproxy/internal/store"
)

// Status is what happened to one policy on one request; its String is the
// `decision` label of rlproxy_requests_total (docs/CONTRACT.md,
// "Metrics").
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

// statusNames maps each Status to its label value (package metrics spells them).
var statusNames = [...]string{
	Allowed:        metrics.DecisionAllowed,
	Delayed:        metrics.DecisionDelayed,
	Rejected:       metrics.DecisionRejected,
	NotCharged:     metrics.DecisionNotCharged,
	DryRunRejected: metrics.DecisionDryRunRejected,
	StoreError:     metrics.DecisionStoreError,
}

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
	keyTail string           // ":" + name + ":" + algorithm code: state is dropped when the algorithm changes
	pk      *partitionKey    // response.partition_key (ietf.go); nil when off
	allot   *store.Allotment // the checks' allotment (storeAllotment); nil when off
	penalty *penaltyBox      // penalty: (penalty.go); nil when off
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
	// CostResponseHeader, when set, is the response header (or trailer)
	// whose whole-number value is the request's real cost, settled after
	// the response (Settle).
	CostResponseHeader string

	match        config.Match
	settles      bool                               // a cost header, or some policy (or plan policy) with count_status
	counters     []*metrics.PolicyCounters          // parallel to Policies
	planCounters map[string]*metrics.PolicyCounters // plan policy name → counters
	keys         []*clientkey.Extractor             // every key spec the route's requests are keyed by, once each
}

// Doubled reports whether request v carries twice a credential one of the
// route's key sources (of its policies, its plan key and its plans'
// policies) reads (clientkey.Extractor.Doubled): such a request is refused
// rather than keyed by one copy while the upstream reads another.
func (r *Route) Doubled(v *reqview.View) bool {
	for _, k := range r.keys {
		if k.Doubled(v) {
			return true
		}
	}
	return false
}

// Limited reports whether the route has any policy (and so sends quota headers).
func (r *Route) Limited() bool { return len(r.Policies) > 0 || r.Plans != nil }

// Settles reports whether the route's requests must be settled with their
// response (Limiter.Settle): the route takes its cost from the response
// (CostResponseHeader), or a policy of the route or of one of its plans
// counts only some response statuses (count_status).
func (r *Route) Settles() bool { return r.settles }

// PlanSet is a compiled config.Plans: hashed credential → plan, a plan
// being its policies. A known credential's plan is keyed by the
// credential's id; the default plan of the others by each policy's own key
// spec.
type PlanSet struct {
	Name     string
	key      *clientkey.Extractor
	plans    [][]*Policy // numbered in name order: planEntry.plan
	names    []string    // plan names, numbered as plans
	fallName string      // the default plan's name
	index    planIndex   // hashed credential id → plan number
	fallback []*Policy   // the default plan
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
	now       func() time.Time
	injected  bool // decisions at now(), not the store's clock
	log       *slog.Logger
	control   *control.Controller // operators' entries; nil: none
	overrides sync.Map            // *control.Rule → *Policy with its limit (overridden)
	keys      *intern.Cache       // store keys of recent clients: a returning one allocates none
}

// Options are the collaborators of a Limiter.
type Options struct {
	// Store decides requests; Floor (a memory store) holds fallback limits
	// used while failing open. Neither is closed by the Limiter.
	Store, Floor store.Store
	// Metrics receives per-policy decisions; nil: metrics.Discard().
	Metrics *metrics.Metrics
	// LeasePrefix makes concurrency lease ids unique across instances.
	LeasePrefix string
	// Now is the policy layer's one clock. Nil (production): store round
	// trips are timed with time.Now and each decision is made at the
	// store's own clock (Valkey's TIME, so a fleet agrees). Set (tests
	// with injected time): it times round trips and every decision,
	// refund and renewal is made at Now(), on the store and the floor.
	Now func() time.Time
	// Log receives debug lines on failed store cleanups (Refund, Release,
	// Renew); nil discards them.
	Log *slog.Logger
	// Control holds the operators' entries (bans, exemptions, overrides,
	// plans) applied before each policy's limit; nil: none. It outlives
	// the Limiter (reloads).
	Control *control.Controller
}

// Policy returns the compiled policy of that name, or nil.
func (l *Limiter) Policy(name string) *Policy { return l.policies[name] }

// Routes returns the compiled routes in match order.
func (l *Limiter) Routes() []*Route { return l.routes }
