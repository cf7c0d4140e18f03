package memory

import (
	"testing"

	"rlproxy/internal/store"
	"rlproxy/internal/testutil/quotasteps"
)

// TestQuotaSizes runs the plan-sized step tables (package quotasteps)
// through the memory store.
func TestQuotaSizes(t *testing.T) {
	s := newStore(t, 100)
	for _, c := range quotasteps.Cases() {
		for i, st := range c.Steps {
			got := decide(t, s, c.Start+st.At, store.Check{Key: c.Name, Limit: c.Limit, Cost: st.Cost})[0]
			if got != st.Want {
				t.Errorf("%s step %d (+%d ms, cost %d):\n got %+v\nwant %+v", c.Name, i, st.At, st.Cost, got, st.Want)
			}
		}
	}
}
