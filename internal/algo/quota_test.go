package algo_test

import (
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/testutil/quotasteps"
)

// TestQuotaSizes runs the plan-sized step tables (package quotasteps) on
// the Go arithmetic; the memory and Valkey stores run the same tables.
func TestQuotaSizes(t *testing.T) {
	for _, c := range quotasteps.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Limit.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			var s algo.State
			for i, st := range c.Steps {
				if got := c.Limit.Decide(&s, c.Start+st.At, st.Cost); got != st.Want {
					t.Errorf("step %d (+%d ms, cost %d):\n got %+v\nwant %+v", i, st.At, st.Cost, got, st.Want)
				}
			}
		})
	}
}
