// Package guard holds decorators of store.Store used in front of a shared
// Valkey: a circuit breaker (Breaker, its state machine Circuit) that stops
// sending decisions to a store that keeps failing, and a local cache of
// refusals (OverLimitCache, as in envoyproxy/ratelimit's local cache) that
// answers repeat offenders without a round trip. All are safe for
// concurrent use. A typical chain is OverLimitCache → Breaker → valkey
// store: cached refusals keep holding while the breaker is open.
package guard

import (
	"context"
	"errors"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// ErrOpen is returned (possibly wrapped; test with errors.Is) by
// Breaker.Decide while the circuit is open: no decision was made and the
// store was not called. The caller applies the policy's on_store_error.
var ErrOpen = errors.New("store circuit open")

// Breaker is a circuit breaker around a store.Store (Nygard, "Release It!"):
// while its Circuit is open Decide returns ErrOpen at once, sparing the
// request path a timeout per request while the store is down; half-open,
// it lets a few probe decisions through. The breaker never retries
// anything itself.
//
// What the circuits judge is round trips, which the store reports to
// Circuits.Record (the Valkey store's Options.OnRoundTrip): a batch of
// many decisions that times out is one failure, not one per decision in
// it, and on a Cluster each master (slot owner) has its own circuit.
//
// A decision that fails only because the caller cancelled its context
// (context.Canceled with ctx done) says nothing about the store: it neither
// counts as a failure nor as a success, and a probe slot it held goes to
// the next caller. A deadline (context.DeadlineExceeded) is a failure: the
// store was too slow.
//
// Release, Refund and Close pass through unchanged; their outcomes never
// move the state (a lease that cannot be released expires after its TTL
// anyway).
type Breaker struct {
	next     store.Store
	circuits *Circuits
	nodeOf   func(key string) string // nil: every key on node ""
}

// Guard returns a Breaker in front of next that refuses a decision while
// the circuit of a node its keys live on (nodeOf; nil = one node "") is
// open, and leaves the counting of round trips to next, which reports
// each one to cs.Record.
func (cs *Circuits) Guard(next store.Store, nodeOf func(key string) string) *Breaker {
	return &Breaker{next: next, circuits: cs, nodeOf: nodeOf}
}

// Up reports whether every node's circuit is closed (the breaker's view
// for rlproxy_breaker_open): false from the failure that opened one until
// its probes close it again.
func (b *Breaker) Up() bool { return b.circuits.Up() }

// maxNodesPerDecision bounds the nodes one decision's checks are admitted
// on without allocating (a route's policies rarely use more than two key
// sources, hence slots); beyond it the checks share the last admission.
const maxNodesPerDecision = 4

// Decide forwards to the wrapped store when the circuits of the nodes of
// all checks' keys admit it (closed, or half-open for their probes);
// otherwise it returns ErrOpen without calling the store. Errors from the
// store are returned unchanged.
func (b *Breaker) Decide(ctx context.Context, checks []store.Check, now int64, out []algo.Decision) (int64, error) {
	var adm [maxNodesPerDecision]admission
	n, ok := b.admit(checks, &adm)
	if !ok {
		return 0, ErrOpen
	}
	used, err := b.next.Decide(ctx, checks, now, out)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		for _, a := range adm[:n] {
			if a.probe {
				a.c.unprobe()
			}
		}
		return used, err
	}
	return used, err
}

// admission is one node's circuit admitting a decision, as a probe or not.
type admission struct {
	c     *Circuit
	probe bool
}

// admit asks the circuit of each distinct node of checks to admit the
// decision, filling adm; on a refusal it gives back the probes already
// taken. It returns how many admissions adm holds and whether all agreed.
func (b *Breaker) admit(checks []store.Check, adm *[maxNodesPerDecision]admission) (int, bool) {
	n := 0
	add := func(node string) bool {
		c := b.circuits.node(node)
		for _, a := range adm[:n] {
			if a.c == c {
				return true
			}
		}
		if n == len(adm) {
			return true
		}
		probe, ok := c.allow()
		if ok {
			adm[n] = admission{c, probe}
			n++
		}
		return ok
	}
	ok := true
	if b.nodeOf == nil || len(checks) == 0 {
		ok = add("")
	}
	for i := 0; ok && b.nodeOf != nil && i < len(checks); i++ {
		ok = add(b.nodeOf(checks[i].Key))
	}
	if !ok {
		for _, a := range adm[:n] {
			if a.probe {
				a.c.unprobe()
			}
		}
	}
	return n, ok
}

// Release forwards to the wrapped store in every state and returns its error;
// it never changes the breaker's state.
func (b *Breaker) Release(ctx context.Context, checks []store.Check) error {
	return b.next.Release(ctx, checks)
}

// Refund forwards to the wrapped store in every state, the circuit open
// included (it follows a decision the store made, and an unrefunded charge
// would stay until it expires), and returns its error; it never changes
// the breaker's state.
func (b *Breaker) Refund(ctx context.Context, checks []store.Check, now int64) error {
	return b.next.Refund(ctx, checks, now)
}

// Close closes the wrapped store.
func (b *Breaker) Close() error { return b.next.Close() }
