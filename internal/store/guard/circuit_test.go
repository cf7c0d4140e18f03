package guard

import (
	"context"
	"fmt"
	"testing"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// TestCircuitRatio: with Failures 5, FailureRatio 0.5, MinCalls 10 and a
// 1 s window, failures that never come 5 in a row open the circuit only
// once they are half of at least 10 round trips of the last second; those
// older than the window no longer count.
func TestCircuitRatio(t *testing.T) {
	clk := &fakeClock{}
	clk.set(0)
	var changes []bool
	c := NewCircuit(BreakerOptions{Failures: 5, FailureRatio: 0.5, MinCalls: 10, Window: time.Second, Now: clk.now,
		OnStateChange: func(open bool) { changes = append(changes, open) }})
	// 4 failures, 1 success, repeated: 8 of 10 failed at 10 calls.
	pattern := []error{errDown, errDown, errDown, errDown, nil}
	for i := range 9 {
		c.Record(pattern[i%5])
	}
	if !c.Up() {
		t.Fatal("opened before MinCalls round trips")
	}
	c.Record(nil) // 10th: 7 of 10 failed... (4+3) but a success does not open
	if !c.Up() {
		t.Fatal("a success opened the circuit")
	}
	c.Record(errDown) // 8 of 11
	if c.Up() || fmt.Sprint(changes) != "[true]" {
		t.Fatalf("8 of 11 failed: Up %v, changes %v; want open", c.Up(), changes)
	}

	// The window forgets: 9 old failures (among 20 round trips), then 2 s
	// later 9 successes and one failure is 1 of 10.
	c = NewCircuit(BreakerOptions{Failures: 100, FailureRatio: 0.5, MinCalls: 10, Window: time.Second, Now: clk.now})
	c.Record(nil)
	c.Record(nil)
	for range 9 {
		c.Record(errDown)
		c.Record(nil)
	}
	clk.set(2 * time.Second)
	for range 9 {
		c.Record(nil)
	}
	if !c.Up() {
		t.Fatal("9 of 20 failed opened the circuit")
	}
	c.Record(errDown)
	if !c.Up() {
		t.Fatal("failures older than the window opened the circuit")
	}
}

// TestCircuitProbes: half-open, the circuit lets exactly Probes (3)
// decisions through; two failures among them (ratio 0.5) open it again
// for a Cooldown, one among three reported closes it. Probes that never report are
// given again a Cooldown after their round began.
func TestCircuitProbes(t *testing.T) {
	clk := &fakeClock{}
	clk.set(0)
	c := NewCircuit(BreakerOptions{Failures: 1, Now: clk.now})
	admit := func() (n int) {
		for range 10 {
			if _, ok := c.allow(); ok {
				n++
			}
		}
		return n
	}
	c.Record(errDown)
	if n := admit(); n != 0 {
		t.Fatalf("open: %d admitted, want 0", n)
	}
	clk.set(DefaultCooldown)
	if n := admit(); n != DefaultProbes {
		t.Fatalf("half-open: %d admitted, want %d", n, DefaultProbes)
	}
	c.Record(errDown) // 1 of 3 failed: below the ratio 0.5
	if c.Up() {
		t.Fatal("closed before every probe reported")
	}
	c.Record(errDown) // 2 of 3 failed: >= 0.5 × 3
	if c.Up() || admit() != 0 {
		t.Fatal("two failed probes of three did not re-open the circuit")
	}
	clk.set(2 * DefaultCooldown)
	if n := admit(); n != DefaultProbes {
		t.Fatalf("second half-open: %d admitted, want %d", n, DefaultProbes)
	}
	// Nobody reports: after a Cooldown, a new round of probes.
	clk.set(3*DefaultCooldown - 1)
	if admit() != 0 {
		t.Fatal("probes given again before a Cooldown")
	}
	clk.set(3 * DefaultCooldown)
	if n := admit(); n != DefaultProbes {
		t.Fatalf("unreported probes: %d admitted a Cooldown later, want %d", n, DefaultProbes)
	}
	c.Record(nil)
	c.Record(errDown)
	if c.Up() {
		t.Fatal("closed before every probe reported")
	}
	c.Record(nil)
	if !c.Up() || admit() != 10 {
		t.Fatal("two successful probes and one failed of three did not close the circuit")
	}
}

// TestGuardLeavesCountingToTheStore: a Breaker made by Circuits.Guard
// does not count Decide's errors (the store reports its round trips), and
// refuses only decisions whose keys live on a node whose circuit is open:
// the other nodes' keys still reach the store.
func TestGuardLeavesCountingToTheStore(t *testing.T) {
	var changes []string
	cs := NewCircuits(BreakerOptions{Failures: 1}, func(node string, open bool) { changes = append(changes, fmt.Sprint(node, " ", open)) }, nil)
	st := &scriptStore{err: errDown}
	nodeOf := func(key string) string { return key[:1] } // "a…" on node a, "b…" on node b
	b := cs.Guard(st, nodeOf)
	out := make([]algo.Decision, 2)
	onA, onB := []store.Check{{Key: "a1"}}, []store.Check{{Key: "b1"}}
	for range 3 {
		if _, err := b.Decide(context.Background(), onA, 0, out[:1]); err != errDown {
			t.Fatalf("Decide: %v, want the store's error", err)
		}
	}
	cs.Record("a", errDown) // the one round trip those made
	if _, err := b.Decide(context.Background(), onA, 0, out[:1]); err != ErrOpen || b.Up() {
		t.Fatalf("node a after a reported failure: %v, Up %v; want ErrOpen, false", err, b.Up())
	}
	st.set(nil)
	if _, err := b.Decide(context.Background(), onB, 0, out[:1]); err != nil {
		t.Fatalf("node b while a is open: %v, want the store's answer", err)
	}
	if _, err := b.Decide(context.Background(), []store.Check{{Key: "b2"}, {Key: "a2"}}, 0, out); err != ErrOpen {
		t.Fatalf("a decision on nodes b and a while a is open: %v, want ErrOpen", err)
	}
	if !cs.Node("b").Up() || fmt.Sprint(changes) != "[a true]" {
		t.Errorf("node b up %v, changes %v; want true, [a true]", cs.Node("b").Up(), changes)
	}
}
