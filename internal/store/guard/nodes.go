package guard

import (
	"sync"
	"sync/atomic"
)

// Circuits is one Circuit per store node (per Cluster slot owner, named by
// its address): a dead master opens only its own circuit, and only
// decisions on its slots take their policies' on_store_error while the
// other masters decide normally. A store without nodes uses the one node
// "". The set grows with the nodes the store reports (its topology: a
// handful of addresses), never with clients or keys.
//
// The nodes follow the topology (Retain): a node that leaves it has its
// circuit removed, and a round trip reported for a node outside it (a
// dead master a client still dialled) is charged to nobody, so a replica
// promoted in its place starts closed and is not charged with its
// failures.
type Circuits struct {
	opts     BreakerOptions
	onChange func(node string, open bool)
	onNew    func(node string)
	open     atomic.Int64 // nodes whose circuit is open now (written under mu)

	mu    sync.RWMutex
	nodes map[string]*nodeCircuit
	known map[string]bool // the topology's nodes (Retain); nil: any node
}

// nodeCircuit is one node's circuit and whether it is counted open.
type nodeCircuit struct {
	c    *Circuit
	open bool // under Circuits.mu
}

// NewCircuits returns an empty set of circuits, each made with opts
// (opts.OnStateChange is replaced). onChange, when non-nil, is called when
// a node's circuit opens (true) or closes (false); onNew, when non-nil,
// when a node is first seen (its circuit closed), so that its state is
// known from then. Both run on the request path: keep them short.
func NewCircuits(opts BreakerOptions, onChange func(node string, open bool), onNew func(node string)) *Circuits {
	return &Circuits{opts: opts, onChange: onChange, onNew: onNew, nodes: map[string]*nodeCircuit{}}
}

// node returns node's circuit, creating it closed on first use. A node
// outside the topology gets a closed circuit of its own that is not kept
// (an admission racing a topology change).
func (cs *Circuits) node(node string) *Circuit {
	cs.mu.RLock()
	e := cs.nodes[node]
	cs.mu.RUnlock()
	if e != nil {
		return e.c
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if e := cs.nodes[node]; e != nil {
		return e.c
	}
	if cs.known != nil && !cs.known[node] {
		return NewCircuit(cs.opts)
	}
	e = &nodeCircuit{}
	opts := cs.opts
	opts.OnStateChange = func(open bool) { cs.changed(node, e, open) }
	e.c = NewCircuit(opts)
	cs.nodes[node] = e
	if cs.onNew != nil {
		cs.onNew(node)
	}
	return e.c
}

// changed records that e, node's circuit, opened or closed, unless e was
// removed meanwhile (its node left the topology): a removed circuit's
// late change must not bring the node's series back.
func (cs *Circuits) changed(node string, e *nodeCircuit, open bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.nodes[node] != e || e.open == open {
		return
	}
	e.open = open
	if open {
		cs.open.Add(1)
	} else {
		cs.open.Add(-1)
	}
	if cs.onChange != nil {
		cs.onChange(node, open)
	}
}

// Retain makes nodes the topology (a Cluster's slot owners, as last read):
// the circuit of every other node is removed — an open one no longer
// counts in Up — and gone, when non-nil, is called with its node (under
// the set's lock: keep it short), so its series can be deleted. From then
// on round trips reported for a node outside nodes are ignored.
func (cs *Circuits) Retain(nodes []string, gone func(node string)) {
	known := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		known[n] = true
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.known = known
	for n, e := range cs.nodes {
		if known[n] {
			continue
		}
		delete(cs.nodes, n)
		if e.open {
			cs.open.Add(-1)
		}
		if gone != nil {
			gone(n)
		}
	}
}

// Record counts one round trip to node (Circuit.Record): the Valkey
// store's Options.OnRoundTrip.
// A node outside the topology (Retain) is not charged.
func (cs *Circuits) Record(node string, err error) {
	cs.mu.RLock()
	e := cs.nodes[node]
	unknown := e == nil && cs.known != nil && !cs.known[node]
	cs.mu.RUnlock()
	if unknown {
		return
	}
	if e != nil {
		e.c.Record(err)
		return
	}
	cs.node(node).Record(err)
}

// Up reports whether every node's circuit is closed.
func (cs *Circuits) Up() bool { return cs.open.Load() == 0 }

// Node returns node's circuit (created closed on first use), for tests and
// for a Breaker's admission.
func (cs *Circuits) Node(node string) *Circuit { return cs.node(node) }
