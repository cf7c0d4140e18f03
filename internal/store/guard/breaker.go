// Package guard holds decorators of store.Store used in front of a shared
// Valkey: a circuit breaker (Breaker) that stops sending decisions to a store
// that keeps failing, and a local cache of refusals (OverLimitCache, as in
// envoyproxy/ratelimit's local cache) that answers repeat offenders without a
// round trip. Both are safe for concurrent use. A typical chain is
// OverLimitCache → Breaker → valkey store: cached refusals keep holding while
// the breaker is open.
package guard

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// ErrOpen is returned (possibly wrapped; test with errors.Is) by
// Breaker.Decide while the circuit is open: no decision was made and the
// store was not called. The caller applies the policy's on_store_error.
var ErrOpen = errors.New("store circuit open")

// Breaker defaults.
const (
	// DefaultFailures is consecutive failed decisions that open the circuit.
	DefaultFailures = 5
	// DefaultCooldown is how long an open circuit refuses before one probe.
	DefaultCooldown = 500 * time.Millisecond
)

// BreakerOptions configures NewBreaker. The zero value uses the defaults.
type BreakerOptions struct {
	// Failures is the number of consecutive Decide errors (timeouts included)
	// that open the circuit; <= 0 means DefaultFailures (5).
	Failures int
	// Cooldown is how long the circuit stays open before it lets one probe
	// decision through; <= 0 means DefaultCooldown (500 ms).
	Cooldown time.Duration
	// Now is the clock; nil means time.Now. Only its monotonic progress
	// matters.
	Now func() time.Time
	// OnStateChange, when non-nil, is called with true when the circuit
	// opens and false when it closes again, synchronously on the goroutine
	// whose decision caused the change (keep it short: it is on the request
	// path). Calls for successive changes never overlap in practice but are
	// not serialised by the breaker.
	OnStateChange func(open bool)
}

// Breaker is a circuit breaker around a store.Store (Nygard, "Release It!"):
// after Failures consecutive failed decisions it opens and Decide returns
// ErrOpen at once for Cooldown, sparing the request path a timeout per
// request while the store is down; then exactly one probe decision goes
// through (half-open): success closes the circuit, failure re-opens it for
// another Cooldown. The breaker never retries anything itself.
//
// A decision that fails only because the caller cancelled its context
// (context.Canceled with ctx done) says nothing about the store: it neither
// counts as a failure nor as a success. A deadline (context.DeadlineExceeded)
// is a failure: the store was too slow.
//
// Release, Refund and Close pass through unchanged; their outcomes never move the
// state (a lease that cannot be released expires after its TTL anyway).
//
// The closed-state hot path is one atomic load and one store, no clock
// read and no allocation.
type Breaker struct {
	next     store.Store
	failures int64
	cooldown time.Duration
	now      func() time.Time
	onChange func(open bool)

	// fails counts consecutive failed decisions.
	fails atomic.Int64
	// openedAt is the Unix ns at which the circuit (re-)opened; 0 = closed.
	openedAt atomic.Int64
	// probing is set while the single half-open probe is in flight.
	probing atomic.Bool
}

// NewBreaker returns a closed Breaker in front of next.
func NewBreaker(next store.Store, opts BreakerOptions) *Breaker {
	b := &Breaker{
		next:     next,
		failures: int64(opts.Failures),
		cooldown: opts.Cooldown,
		now:      opts.Now,
		onChange: opts.OnStateChange,
	}
	if b.failures <= 0 {
		b.failures = DefaultFailures
	}
	if b.cooldown <= 0 {
		b.cooldown = DefaultCooldown
	}
	if b.now == nil {
		b.now = time.Now
	}
	return b
}

// Up reports whether the circuit is closed (the rlproxy_store_up metric): false
// from the failure that opened it until a probe succeeds.
func (b *Breaker) Up() bool { return b.openedAt.Load() == 0 }

// Decide forwards to the wrapped store while the circuit is closed. While it
// is open it returns ErrOpen without calling the store, except for one probe
// per elapsed Cooldown. Errors from the store are returned unchanged.
func (b *Breaker) Decide(ctx context.Context, checks []store.Check, now int64, out []algo.Decision) (int64, error) {
	probe := false
	if opened := b.openedAt.Load(); opened != 0 {
		if b.now().UnixNano()-opened < int64(b.cooldown) || !b.probing.CompareAndSwap(false, true) {
			return 0, ErrOpen
		}
		// A probe of an earlier cooldown may have just closed or re-opened
		// the circuit between the load and the CompareAndSwap.
		if b.openedAt.Load() != opened {
			b.probing.Store(false)
			return 0, ErrOpen
		}
		probe = true
	}
	used, err := b.next.Decide(ctx, checks, now, out)
	switch {
	case err == nil:
		b.fails.Store(0)
		if probe {
			b.openedAt.Store(0)
			b.probing.Store(false)
			b.notify(false)
		}
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		// The caller gave up: no verdict on the store. A probe slot is
		// handed to the next caller.
		if probe {
			b.probing.Store(false)
		}
	case probe:
		b.openedAt.Store(b.openTime())
		b.probing.Store(false)
	default:
		if b.fails.Add(1) >= b.failures && b.openedAt.CompareAndSwap(0, b.openTime()) {
			b.notify(true)
		}
	}
	return used, err
}

// openTime is the clock in Unix ns, never 0 (0 means closed).
func (b *Breaker) openTime() int64 {
	return max(b.now().UnixNano(), 1)
}

func (b *Breaker) notify(open bool) {
	if b.onChange != nil {
		b.onChange(open)
	}
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
