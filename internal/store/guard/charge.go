package guard

import (
	"context"

	"rlproxy/internal/store"
)

// Charge forwards to the wrapped store in every state, the circuit open
// included (like Refund, it follows a decision the store made), and
// returns its error; it never changes the breaker's state.
func (b *Breaker) Charge(ctx context.Context, checks []store.Check, now int64) error {
	return b.next.Charge(ctx, checks, now)
}

// Charge always forwards to the wrapped store. A charge only moves a
// key's state away from acceptance, so a refusal the cache holds stays
// right (it may end earlier than the store's new one: the store then
// refuses, nothing is admitted wrongly).
func (c *OverLimitCache) Charge(ctx context.Context, checks []store.Check, now int64) error {
	return c.next.Charge(ctx, checks, now)
}
