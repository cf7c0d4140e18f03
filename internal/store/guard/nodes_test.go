package guard

import (
	"fmt"
	"testing"
)

// TestCircuitsFollowTopology: a node that leaves the topology (Retain)
// takes its open circuit with it (Up again, gone told once), a failure
// reported for it afterwards is charged to nobody, and the node that
// replaces it starts closed, its first failure counted from zero.
func TestCircuitsFollowTopology(t *testing.T) {
	var changes, gone []string
	cs := NewCircuits(BreakerOptions{Failures: 2}, func(node string, open bool) { changes = append(changes, fmt.Sprint(node, " ", open)) }, nil)
	cs.Retain([]string{"a", "b"}, nil)
	cs.Record("a", errDown)
	cs.Record("a", errDown)
	cs.Record("b", nil)
	if cs.Up() || cs.Node("a").Up() {
		t.Fatalf("after 2 failures of a: Up %v, a up %v; want false, false", cs.Up(), cs.Node("a").Up())
	}
	cs.Retain([]string{"b", "c"}, func(node string) { gone = append(gone, node) }) // c (a's replica) took over
	if !cs.Up() || fmt.Sprint(gone) != "[a]" {
		t.Fatalf("after a left: Up %v, gone %v; want true, [a]", cs.Up(), gone)
	}
	cs.Record("a", errDown) // a client still dialled the dead node
	cs.Record("a", errDown)
	cs.Record("c", errDown) // one failure of c's own: below Failures
	if !cs.Up() || !cs.Node("c").Up() || !cs.Node("a").Up() {
		t.Errorf("after late failures of a and one of c: Up %v, c up %v, a up %v; want all true", cs.Up(), cs.Node("c").Up(), cs.Node("a").Up())
	}
	if fmt.Sprint(changes) != "[a true]" {
		t.Errorf("state changes %v, want [a true] only", changes)
	}
	cs.Retain([]string{"b", "c"}, func(node string) { gone = append(gone, node) })
	if fmt.Sprint(gone) != "[a]" {
		t.Errorf("gone %v after an unchanged topology, want [a]", gone)
	}
}
