package valkey

import (
	"fmt"
	"slices"
	"testing"

	"rlproxy/internal/algo"
)

// TestReferenceExperiment reproduces docs/PRODUCT.md's table through the Valkey
// scripts with injected time, each pattern on fresh keys: accepted counts,
// most requests reaching the upstream in any 1 s (edge), and the leaky
// bucket's longest wait.
func TestReferenceExperiment(t *testing.T) {
	st, _ := newStore(t)
	// Columns: fixed window, sliding log, sliding counter, token, leaky.
	want := map[string]struct {
		accepted [5]int
		most     [5]int // edge only
		wait     int64  // leaky bucket's longest wait, ms
	}{
		"edge":   {[5]int{20, 10, 11, 10, 10}, [5]int{20, 10, 11, 10, 2}, 8550},
		"steady": {[5]int{60, 60, 60, 69, 69}, [5]int{}, 8726},
		"burst":  {[5]int{10, 10, 10, 10, 10}, [5]int{}, 8703},
	}
	for _, p := range algo.ReferencePatterns() {
		w := want[p.Name]
		for a, l := range algo.ReferenceLimits() {
			key := fmt.Sprintf("rl:v2:{ref}:%s:%d", p.Name, a)
			var served []int64
			var longest int64
			for _, now := range p.Times {
				if d := decide1(t, st, key, l, 1, "", now); d.Allowed {
					served = append(served, now+d.Wait)
					longest = max(longest, d.Wait)
				}
			}
			if len(served) != w.accepted[a] {
				t.Errorf("%s, %s: accepted %d/%d, want %d", p.Name, l.Kind, len(served), len(p.Times), w.accepted[a])
			}
			if p.Name == "edge" {
				slices.Sort(served)
				if m := algo.MostInWindow(served, 1000); m != w.most[a] {
					t.Errorf("edge, %s: most served in 1 s %d, want %d", l.Kind, m, w.most[a])
				}
			}
			if l.Kind == algo.LeakyBucket {
				t.Logf("%s: leaky bucket longest wait %d ms (%.1f s)", p.Name, longest, float64(longest)/1000)
				if longest != w.wait {
					t.Errorf("%s: leaky bucket longest wait %d ms, want %d", p.Name, longest, w.wait)
				}
			}
		}
	}
}
