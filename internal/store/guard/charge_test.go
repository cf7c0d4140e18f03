package guard

import (
	"context"
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/store/memory"
)

// Charge for the package's test stores (declared here, next to the test
// of the charge path): they charge nothing.
func (s *refStore) Charge(context.Context, []store.Check, int64) error    { return nil }
func (s *scriptStore) Charge(context.Context, []store.Check, int64) error { return nil }
func (s *flakyStore) Charge(context.Context, []store.Check, int64) error  { return nil }
func (s *refundSpy) Charge(context.Context, []store.Check, int64) error   { return nil }

// TestChargePassesThrough: the breaker (open included) and the over-limit
// cache hand an unconditional charge to the store they wrap.
func TestChargePassesThrough(t *testing.T) {
	ms := memory.New(memory.Options{MaxKeys: 10, SweepInterval: -1})
	defer ms.Close()
	c := NewOverLimitCache(ms, OverLimitOptions{})
	b := newBreaker(c, BreakerOptions{})
	l := algo.Limit{Kind: algo.FixedWindow, Count: 5, Period: 60_000}
	const now = 1_700_000_010_000
	ck := []store.Check{{Key: "{c}:fw", Limit: l, Cost: 4}}
	if err := b.Charge(context.Background(), ck, now); err != nil {
		t.Fatal(err)
	}
	out := make([]algo.Decision, 1)
	if _, err := ms.Decide(context.Background(), []store.Check{{Key: "{c}:fw", Limit: l}}, now, out); err != nil || out[0].Remaining != 1 {
		t.Errorf("after charging 4 of 5 through the guards: %+v %v, want 1 remaining", out[0], err)
	}
}
