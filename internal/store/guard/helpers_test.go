package guard

import (
	"context"
	"errors"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// newBreaker returns a Breaker in front of next, one circuit for opts, and
// every Decide of next one round trip reported to it (as the Valkey store
// reports its batches), except those whose caller gave up.
func newBreaker(next store.Store, opts BreakerOptions) *Breaker {
	var onChange func(string, bool)
	if f := opts.OnStateChange; f != nil {
		onChange = func(_ string, open bool) { f(open) }
	}
	cs := NewCircuits(opts, onChange, nil)
	return cs.Guard(&reporting{Store: next, cs: cs}, nil)
}

// reporting reports each Decide of its Store to cs as a round trip.
type reporting struct {
	store.Store
	cs *Circuits
}

func (r *reporting) Decide(ctx context.Context, checks []store.Check, now int64, out []algo.Decision) (int64, error) {
	used, err := r.Store.Decide(ctx, checks, now, out)
	if !errors.Is(err, context.Canceled) || ctx.Err() == nil {
		r.cs.Record("", err)
	}
	return used, err
}
