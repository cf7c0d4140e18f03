package policy

import (
	"strings"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/clientkey"
	"rlproxy/internal/metrics"
	"rlproxy/internal/store"
)

// stage names one store decision of a request. Decide makes at most two of
// the three; each is recorded in Result.stages.
type stage uint8

const (
	noStage      stage = iota // an exempt policy: no check, nothing decided
	stageEnforce              // the store, enforcing policies
	stageDryRun               // the store, dry-run policies, asked only once the enforcing ones accepted
	stageFloor                // the per-instance fallback floor, after the store failed the enforcing decision
	stageCount
)

// decision records one store decision: the checks as sent (keys, limits,
// costs, leases), the store's answer to each, the instant the store decided
// at and whether it charged. Refund, Release and Renew act on exactly what
// it records, so a charge is undone at the instant and cost it was made.
type decision struct {
	checks []store.Check
	out    []algo.Decision // one per check
	// at is the store's decision time (Unix ms); asked reports that the
	// store answered; charged that it accepted every check, which charged
	// them all (a store decision is atomic: one refusal charges none).
	at             int64
	asked, charged bool
	err            error // the store's error, when it could not decide
}

func (d *decision) reset() {
	d.checks, d.out = d.checks[:0], d.out[:0]
	d.at, d.asked, d.charged, d.err = 0, false, false, nil
}

// add appends ck (and room for its answer) and returns its index.
func (d *decision) add(ck store.Check) int {
	d.checks = append(d.checks, ck)
	d.out = append(d.out, algo.Decision{})
	return len(d.checks) - 1
}

// record sets the store's answer: the instant at, or its error.
func (d *decision) record(at int64, err error) {
	if err != nil {
		d.err = err
		return
	}
	d.at, d.asked, d.charged = at, true, true
	for i := range d.out {
		d.charged = d.charged && d.out[i].Allowed
	}
}

// leases reports whether d holds concurrency leases: it charged checks that
// carry one.
func (d *decision) leases() bool {
	if !d.charged {
		return false
	}
	for i := range d.checks {
		if d.checks[i].Lease != "" {
			return true
		}
	}
	return false
}

// Item is one policy's part of a Result.
type Item struct {
	// Policy is the policy decided.
	Policy *Policy
	// Decision is the store's answer for Policy (zero when exempt).
	Decision algo.Decision
	// Status is how the request counts in Policy's metrics.
	Status Status
	// Unknown reports that the store could not say: no quota to report.
	Unknown bool
	// Refused says why the policy refused before any store decision (a
	// control ban, the penalty box); NotRefused otherwise.
	Refused Refusal
	// key is the store key of a Refused item (it has no check).
	key string

	counters *metrics.PolicyCounters
	// stage is the decision that answered for Policy (noStage: exempt) and
	// check its check's index there. When the store failed, a policy with a
	// fallback moves to the floor's decision.
	stage stage
	check int
}

// Result is the verdict on one request, and the record of what deciding it
// charged. Reuse one per request; Decide resets it.
type Result struct {
	Outcome Outcome
	// Wait is how long to hold the request before forwarding (ms).
	Wait int64
	// RetryAfter is ms until a retry would be accepted (Refuse only): the
	// longest of the refusing policies' waits (docs/CONTRACT.md).
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

	stages   [stageCount]decision // indexed by stage; stages[noStage] stays empty
	cost     int64                // cost charged to each non-concurrency check
	keyBuf   []byte
	credBuf  []byte        // the client id of keyed plan items and DecideKeyed's (addItem reuses keyBuf)
	settle   []store.Check // scratch: the checks Settle refunds, one stage at a time
	extra    []store.Check // scratch: the checks Settle charges (a dearer response)
	refunded bool          // Refund ran
	settled  bool          // Settle ran
	plan     string        // the client's plan ("" = the route has no plans)
	// credential: credBuf holds a known plan credential's client id
	credential bool
	// refused: an enforcing policy refused before the store (Refused)
	refused bool
	// scratch of the penalty box lookup (boxes): the box checks, their
	// answers, and the item of each
	boxChecks []store.Check
	boxOut    []algo.Decision
	boxItems  []int
}

// Plan returns the name of the plan the decision applied: the known
// credential's, the default plan's, or "" when the route has no plans.
func (res *Result) Plan() string { return res.plan }

// Credential returns the client id of a known plan credential (valid
// until res is reused), or nil.
func (res *Result) Credential() []byte {
	if !res.credential {
		return nil
	}
	return res.credBuf
}

func (res *Result) reset(cost int64) {
	res.Outcome, res.Wait, res.RetryAfter, res.Now, res.Binding, res.Err = Pass, 0, 0, 0, -1, nil
	res.Items = res.Items[:0]
	for s := range res.stages {
		res.stages[s].reset()
	}
	res.cost, res.refunded, res.settled = cost, false, false
	res.plan, res.credential, res.refused = "", false, false
}

// Refunded reports whether Refund undid res's charges (logs tell a request
// refused by a shaping cap from one served).
func (res *Result) Refunded() bool { return res.refunded }

// HasLeases reports whether res holds concurrency leases to renew and
// release: a Pass whose enforcing or dry-run decision granted some. A
// dry-run store error does not void the enforcing checks' leases.
func (res *Result) HasLeases() bool {
	return res.Outcome == Pass && !res.refunded && (res.stages[stageEnforce].leases() || res.stages[stageDryRun].leases())
}

// LeaseRenewEvery is how often a request holding leases renews them: a
// third of the shortest lease (ms), so two renewals may fail before expiry.
func (res *Result) LeaseRenewEvery() time.Duration {
	var min int64
	for _, s := range [...]stage{stageEnforce, stageDryRun} {
		d := &res.stages[s]
		if !d.charged {
			continue
		}
		for _, ck := range d.checks {
			if ck.Lease != "" && (min == 0 || ck.Limit.Period < min) {
				min = ck.Limit.Period
			}
		}
	}
	return time.Duration(min/3) * time.Millisecond
}

// KeyFor returns the store key of Items[i] (client ids derived from
// credentials are already hashed in it), or "" when it had no check (an
// exempt policy); a policy Refused before the store has its key.
func (res *Result) KeyFor(i int) string {
	it := &res.Items[i]
	if it.stage == noStage {
		return it.key
	}
	return res.stages[it.stage].checks[it.check].Key
}

// RedactedKeyFor is KeyFor(i) with its client id shortened by
// clientkey.Redact, for logs: a hashed credential is not printed whole.
func (res *Result) RedactedKeyFor(i int) string {
	return res.DisplayKeyFor(i, clientkey.Redact)
}

// DisplayKeyFor is KeyFor(i) with its client id as show shows it
// (clientkey.Display: an address hashed as on the admin page).
func (res *Result) DisplayKeyFor(i int, show func(id string) string) string {
	k := res.KeyFor(i)
	open, end := strings.IndexByte(k, '{'), strings.IndexByte(k, '}')
	if open < 0 || end < open {
		return k
	}
	return k[:open+1] + show(k[open+1:end]) + k[end:]
}

// pickBinding chooses the policy the legacy headers and the problem body
// describe: fewest remaining, then longest reset (docs/CONTRACT.md).
func (res *Result) pickBinding() {
	res.Binding = -1
	for i := range res.Items {
		it := &res.Items[i]
		if (it.stage == noStage && it.Refused == NotRefused) || it.Unknown {
			continue
		}
		if res.Binding < 0 || Binds(it.Decision, res.Items[res.Binding].Decision) {
			res.Binding = i
		}
	}
}

// Binds reports whether decision d binds over b (the policy a client meets
// first): fewer requests remaining, or as many and a later reset
// (docs/CONTRACT.md). Every choice of a binding policy uses it.
func Binds(d, b algo.Decision) bool {
	return d.Remaining < b.Remaining || (d.Remaining == b.Remaining && d.ResetAfter > b.ResetAfter)
}
