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
type Circuits struct {
	opts     BreakerOptions
	onChange func(node string, open bool)
	onNew    func(node string)
	open     atomic.Int64 // nodes whose circuit is open now

	mu    sync.RWMutex
	nodes map[string]*Circuit
}

// NewCircuits returns an empty set of circuits, each made with opts
// (opts.OnStateChange is replaced). onChange, when non-nil, is called when
// a node's circuit opens (true) or closes (false); onNew, when non-nil,
// when a node is first seen (its circuit closed), so that its state is
// known from then. Both run on the request path: keep them short.
func NewCircuits(opts BreakerOptions, onChange func(node string, open bool), onNew func(node string)) *Circuits {
	return &Circuits{opts: opts, onChange: onChange, onNew: onNew, nodes: map[string]*Circuit{}}
}

// node returns node's circuit, creating it closed on first use.
func (cs *Circuits) node(node string) *Circuit {
	cs.mu.RLock()
	c := cs.nodes[node]
	cs.mu.RUnlock()
	if c != nil {
		return c
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c := cs.nodes[node]; c != nil {
		return c
	}
	opts := cs.opts
	opts.OnStateChange = func(open bool) {
		if open {
			cs.open.Add(1)
		} else {
			cs.open.Add(-1)
		}
		if cs.onChange != nil {
			cs.onChange(node, open)
		}
	}
	c = NewCircuit(opts)
	cs.nodes[node] = c
	if cs.onNew != nil {
		cs.onNew(node)
	}
	return c
}

// Record counts one round trip to node (Circuit.Record): the Valkey
// store's Options.OnRoundTrip.
func (cs *Circuits) Record(node string, err error) { cs.node(node).Record(err) }

// Up reports whether every node's circuit is closed.
func (cs *Circuits) Up() bool { return cs.open.Load() == 0 }

// Node returns node's circuit (created closed on first use), for tests and
// for a Breaker's admission.
func (cs *Circuits) Node(node string) *Circuit { return cs.node(node) }
