package algo

import (
	"fmt"
	"slices"
	"testing"
)

// runPattern decides every request of times on fresh state and returns the
// accepted count, the longest Wait (ms) and the served times (arrival + Wait).
func runPattern(l Limit, times []int64) (accepted int, longestWait int64, served []int64) {
	var s State
	for _, t := range times {
		d := l.Decide(&s, t, 1)
		if d.Allowed {
			accepted++
			longestWait = max(longestWait, d.Wait)
			served = append(served, t+d.Wait)
		}
	}
	slices.Sort(served)
	return accepted, longestWait, served
}

// TestReferenceExperiment reproduces docs/PRODUCT.md's table, the leaky bucket's
// longest waits and the most requests served in any closed 1 s of edge.
func TestReferenceExperiment(t *testing.T) {
	wantAccepted := map[string][]int{
		"edge":   {20, 10, 11, 10, 10},
		"steady": {60, 60, 60, 69, 69},
		"burst":  {10, 10, 10, 10, 10},
	}
	wantWait := map[string]string{"edge": "8.6", "steady": "8.7", "burst": "8.7"}
	wantMost := []int{20, 10, 11, 10, 2}
	wantSent := map[string]int{"edge": 20, "steady": 180, "burst": 30}
	for _, p := range ReferencePatterns() {
		if len(p.Times) != wantSent[p.Name] {
			t.Errorf("%s: %d requests, want %d", p.Name, len(p.Times), wantSent[p.Name])
		}
		for i, l := range ReferenceLimits() {
			acc, wait, served := runPattern(l, p.Times)
			if acc != wantAccepted[p.Name][i] {
				t.Errorf("%s, %v: accepted %d/%d, want %d", p.Name, l.Kind, acc, len(p.Times), wantAccepted[p.Name][i])
			}
			if l.Kind == LeakyBucket {
				if got := fmt.Sprintf("%.1f", float64(wait)/1000); got != wantWait[p.Name] {
					t.Errorf("%s, leaky bucket: longest wait %s s (%d ms), want %s s", p.Name, got, wait, wantWait[p.Name])
				}
			} else if wait != 0 {
				t.Errorf("%s, %v: wait %d ms, want 0", p.Name, l.Kind, wait)
			}
			if p.Name == "edge" {
				if got := MostInWindow(served, 1000); got != wantMost[i] {
					t.Errorf("edge, %v: most in any 1 s %d, want %d (served %v)", l.Kind, got, wantMost[i], served)
				}
			}
		}
	}
}
