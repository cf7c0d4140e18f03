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
// What the circuit judges is round trips. A Breaker made by NewBreaker
// counts each Decide as one (a store that makes one round trip per
// decision); one made by Circuit.Guard leaves the counting to the store,
// which reports each round trip to Circuit.Record (the Valkey store's
// Options.OnRoundTrip), so that a batch of many decisions that times out
// is one failure, not one per decision in it.
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
	next   store.Store
	c      *Circuit
	record bool // Decide's outcomes are the round trips (NewBreaker)
}

// NewBreaker returns a Breaker in front of next, with a new closed Circuit
// for opts, that counts every Decide as one round trip.
func NewBreaker(next store.Store, opts BreakerOptions) *Breaker {
	return &Breaker{next: next, c: NewCircuit(opts), record: true}
}

// Guard returns a Breaker in front of next that refuses while c is open
// and leaves the counting of round trips to next, which reports each one
// to c.Record.
func (c *Circuit) Guard(next store.Store) *Breaker {
	return &Breaker{next: next, c: c}
}

// Up reports whether the circuit is closed (the rlproxy_store_up metric's
// breaker view): false from the failure that opened it until the probes
// close it again.
func (b *Breaker) Up() bool { return b.c.Up() }

// Decide forwards to the wrapped store while the circuit is closed, and
// while it is half-open for its probes; otherwise it returns ErrOpen
// without calling the store. Errors from the store are returned unchanged.
func (b *Breaker) Decide(ctx context.Context, checks []store.Check, now int64, out []algo.Decision) (int64, error) {
	probe, ok := b.c.allow()
	if !ok {
		return 0, ErrOpen
	}
	used, err := b.next.Decide(ctx, checks, now, out)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		if probe {
			b.c.unprobe()
		}
		return used, err
	}
	if b.record {
		b.c.Record(err)
	}
	return used, err
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
