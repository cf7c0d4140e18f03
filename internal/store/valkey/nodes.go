package valkey

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
)

// topologyEvery is how often a Cluster's slot owners are read again
// (CLUSTER SLOTS); a failed round trip asks for a read at once, so that a
// replica promoted after a master died gets its own circuit within about
// a second.
const topologyEvery = time.Second

// slotTable maps each Cluster hash slot to its master's "host:port".
type slotTable struct {
	owner  [16384]uint16 // index into nodes
	nodes  []string
	sorted []string // nodes, sorted (Options.OnTopology)
}

// topology is the Store's view of the Cluster's slot owners, for
// Options.OnRoundTrip and Node; nil table outside Cluster mode.
type topology struct {
	table atomic.Pointer[slotTable]
	kick  chan struct{} // capacity 1: read again now
	stop  chan struct{} // closed by Close
}

// Node returns the name of the store node that holds key: on a Cluster
// the address of its slot's master (CLUSTER SLOTS, as last read); else,
// and before the first read, the configured addresses joined by commas.
// It is the node a guard.Circuits breaker judges the key's decisions by.
func (s *Store) Node(key string) string { return s.nodeIn(s.topo.table.Load(), key) }

// nodeIn is the node of key in table t (nil: outside Cluster mode, or
// before the first read).
func (s *Store) nodeIn(t *slotTable, key string) string {
	if t == nil {
		return s.single
	}
	return t.nodes[t.owner[Slot(key)]]
}

// blame is the node a round trip for key, sent when t was the slot table,
// is charged with: the address a network error names (the node valkey-go
// really tried: its own view of the slots may lag or lead ours while a
// replica takes over), else key's owner in t — the owner when it was sent,
// not when it failed, so that a replica promoted meanwhile is not charged
// with a timeout of the master it replaces.
func (s *Store) blame(t *slotTable, key string, err error) string {
	var op *net.OpError
	if err != nil && t != nil && errors.As(err, &op) && op.Addr != nil {
		return op.Addr.String()
	}
	return s.nodeIn(t, key)
}

// watchTopology reads c's slot owners now and then every topologyEvery,
// or at once when kicked, until Close. c is a Cluster client.
func (s *Store) watchTopology(c valkeygo.Client) {
	s.readTopology(c)
	go func() {
		tick := time.NewTicker(topologyEvery)
		defer tick.Stop()
		for {
			select {
			case <-s.topo.stop:
				return
			case <-tick.C:
			case <-s.topo.kick:
			}
			s.readTopology(c)
		}
	}()
}

// kickTopology asks for a read of the slot owners (after a failed round
// trip) without waiting.
func (s *Store) kickTopology() {
	select {
	case s.topo.kick <- struct{}{}:
	default:
	}
}

// readTopology replaces the slot table with CLUSTER SLOTS' answer; on an
// error the last table stays.
func (s *Store) readTopology(c valkeygo.Client) {
	tmo := s.tmo
	if tmo <= 0 {
		tmo = time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), tmo)
	defer cancel()
	reply, err := c.Do(ctx, c.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return
	}
	t, err := parseSlots(reply)
	if err != nil {
		return
	}
	// The breakers learn the new owners first: a round trip charged by
	// the new table finds its node's circuit already kept.
	if prev := s.topo.table.Load(); s.onTopo != nil && (prev == nil || !slices.Equal(prev.sorted, t.sorted)) {
		s.onTopo(t.sorted)
	}
	s.topo.table.Store(t)
}

// parseSlots reads a CLUSTER SLOTS reply: per range start, end, then the
// master's [host, port, ...] and its replicas'.
func parseSlots(reply []valkeygo.ValkeyMessage) (*slotTable, error) {
	t := &slotTable{}
	index := map[string]uint16{}
	for _, r := range reply {
		e, err := r.ToArray()
		if err != nil || len(e) < 3 {
			return nil, fmt.Errorf("reading CLUSTER SLOTS: range %v", r)
		}
		lo, err1 := e[0].AsInt64()
		hi, err2 := e[1].AsInt64()
		m, err3 := e[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(m) < 2 || lo < 0 || hi > 16383 || lo > hi {
			return nil, fmt.Errorf("reading CLUSTER SLOTS: range %v", r)
		}
		host, err1 := m[0].ToString()
		port, err2 := m[1].AsInt64()
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("reading CLUSTER SLOTS: master %v", m)
		}
		node := fmt.Sprintf("%s:%d", host, port)
		i, ok := index[node]
		if !ok {
			i = uint16(len(t.nodes))
			index[node] = i
			t.nodes = append(t.nodes, node)
		}
		for sl := lo; sl <= hi; sl++ {
			t.owner[sl] = i
		}
	}
	if len(t.nodes) == 0 {
		return nil, fmt.Errorf("reading CLUSTER SLOTS: no slots")
	}
	t.sorted = slices.Sorted(slices.Values(t.nodes))
	return t, nil
}

// nodeTrips collects one DoMulti's outcome per node: a batch spread over
// several masters is one round trip to each.
type nodeTrips []struct {
	node string
	err  error
}

// add records a result for node: the first error that says node did not
// answer (roundTripErr) makes its round trip a failure.
func (nt *nodeTrips) add(node string, err error) {
	err = roundTripErr(err)
	for i := range *nt {
		if (*nt)[i].node == node {
			if (*nt)[i].err == nil {
				(*nt)[i].err = err
			}
			return
		}
	}
	*nt = append(*nt, struct {
		node string
		err  error
	}{node, err})
}

// report hands each node's round trip to Options.OnRoundTrip.
func (nt nodeTrips) report(s *Store) {
	for _, t := range nt {
		s.roundTrip(t.node, t.err)
	}
}

// singleName names the one node of a store outside Cluster mode.
func singleName(addrs []string) string { return strings.Join(addrs, ",") }
