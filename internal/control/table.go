package control

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"rlproxy/internal/algo"
)

// Rule is one applied entry as the decision path reads it. Rules are
// immutable once in a Table.
type Rule struct {
	// ID is the entry's id.
	ID string
	// Action is ActionBan, ActionExempt or ActionOverride.
	Action string
	// Limit is an override's limit (HasLimit); Plan an override's plan
	// (a plan set's table).
	Limit    algo.Limit
	HasLimit bool
	Plan     string
	// Created and Expires are Unix ms; Expires 0 never expires.
	Created, Expires int64

	rank uint8 // precedence: ban 0, exempt 1, override 2
	next *Rule // the next rule of the same client, in precedence order
}

// Left is the time in ms until r expires at now (Unix ms), or -1 for a
// rule that never expires.
func (r *Rule) Left(now int64) int64 {
	if r.Expires == 0 {
		return -1
	}
	return max(r.Expires-now, 0)
}

// live reports whether r applies at now.
func (r *Rule) live(now int64) bool { return r.Expires == 0 || now < r.Expires }

// before reports whether r takes precedence over o: ban > exempt >
// override, then the newer.
func (r *Rule) before(o *Rule) bool {
	return r.rank < o.rank || r.rank == o.rank && r.Created > o.Created
}

func rankOf(action string) uint8 {
	switch action {
	case ActionBan:
		return 0
	case ActionExempt:
		return 1
	}
	return 2
}

// Table holds the rules of one policy (or plan set), by client: hashed
// credential and ip ids, addresses, and prefixes (a per-policy prefix
// table, searched from the longest length present). It is safe for
// concurrent use; Find does not allocate.
type Table struct {
	n     atomic.Int64 // rules held; 0 lets Find return at once
	mu    sync.RWMutex
	ids   map[string]*Rule       // "h:…" ids of credentials
	addrs map[netip.Addr]*Rule   // ip entries
	nets  map[netip.Prefix]*Rule // cidr entries
	bits  []int                  // prefix lengths in nets, longest first (IPv4 lengths as for 4-byte addresses)
}

func newTable() *Table {
	return &Table{ids: map[string]*Rule{}, addrs: map[netip.Addr]*Rule{}, nets: map[netip.Prefix]*Rule{}}
}

// Len is the number of rules t holds.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return int(t.n.Load())
}

// Find returns the rule that applies at now (Unix ms) to a client with id
// (the policy's client id, e.g. "h:…" or "ip:…") and resolved address
// addr (invalid: none; then an "ip:ADDR" id stands for it), or nil: of the live rules matching the id, the
// address or a prefix holding it, the one that takes precedence (ban >
// exempt > override, then the newest). A nil t has none.
func (t *Table) Find(id []byte, addr netip.Addr, now int64) *Rule {
	if t == nil || t.n.Load() == 0 {
		return nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	var best *Rule
	if len(id) > 0 && len(t.ids) > 0 {
		best = better(best, t.ids[string(id)], now)
	}
	if !addr.IsValid() && len(id) > 3 && string(id[:3]) == "ip:" {
		addr, _ = netip.ParseAddr(string(id[3:])) // a decision keyed by id alone (Envoy RLS); a masked id is no address
	}
	if !addr.IsValid() {
		return best
	}
	addr = addr.Unmap().WithZone("")
	if len(t.addrs) > 0 {
		best = better(best, t.addrs[addr], now)
	}
	for _, b := range t.bits {
		if b > addr.BitLen() {
			continue
		}
		if p, err := addr.Prefix(b); err == nil {
			best = better(best, t.nets[p], now)
		}
	}
	return best
}

// better returns the first live rule of chain if it takes precedence over
// best, else best.
func better(best, chain *Rule, now int64) *Rule {
	for r := chain; r != nil; r = r.next {
		if r.live(now) {
			if best == nil || r.before(best) {
				return r
			}
			return best
		}
	}
	return best
}

// add puts r in the chain of client (an id, "ip:ADDR" or "cidr:PREFIX").
func (t *Table) add(client string, r *Rule) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch kind, rest, _ := strings.Cut(client, ":"); kind {
	case SourceIP:
		a, _ := netip.ParseAddr(rest) // records hold canonical addresses
		t.addrs[a] = insert(t.addrs[a], r)
	case SourceCIDR:
		p, _ := netip.ParsePrefix(rest)
		t.nets[p] = insert(t.nets[p], r)
		if !slices.Contains(t.bits, p.Bits()) {
			t.bits = append(t.bits, p.Bits())
			slices.SortFunc(t.bits, func(a, b int) int { return b - a })
		}
	default:
		t.ids[client] = insert(t.ids[client], r)
	}
	t.n.Add(1)
}

// remove takes the rule id out of client's chain; false when absent.
func (t *Table) remove(client, id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ok bool
	switch kind, rest, _ := strings.Cut(client, ":"); kind {
	case SourceIP:
		a, _ := netip.ParseAddr(rest)
		ok = drop(t.addrs, a, id)
	case SourceCIDR:
		p, _ := netip.ParsePrefix(rest)
		ok = drop(t.nets, p, id)
	default:
		ok = drop(t.ids, client, id)
	}
	if ok {
		t.n.Add(-1)
	}
	return ok
}

// chain returns the ids of client's rules (client as for add), in
// precedence order.
func (t *Table) chain(client string) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var head *Rule
	switch kind, rest, _ := strings.Cut(client, ":"); kind {
	case SourceIP:
		a, _ := netip.ParseAddr(rest)
		head = t.addrs[a]
	case SourceCIDR:
		p, _ := netip.ParsePrefix(rest)
		head = t.nets[p]
	default:
		head = t.ids[client]
	}
	var ids []string
	for r := head; r != nil; r = r.next {
		ids = append(ids, r.ID)
	}
	return ids
}

// insert adds r to chain in precedence order and returns the head.
func insert(chain, r *Rule) *Rule {
	if chain == nil || r.before(chain) {
		r.next = chain
		return r
	}
	p := chain
	for p.next != nil && !r.before(p.next) {
		p = p.next
	}
	r.next, p.next = p.next, r
	return chain
}

// drop removes rule id from m[k]'s chain (under the write lock: Find's
// callers read a rule's fields, never its next).
func drop[K comparable](m map[K]*Rule, k K, id string) bool {
	head := m[k]
	if head == nil {
		return false
	}
	if head.ID == id {
		if head.next == nil {
			delete(m, k)
		} else {
			m[k] = head.next
		}
		return true
	}
	for p := head; p.next != nil; p = p.next {
		if p.next.ID == id {
			p.next = p.next.next
			return true
		}
	}
	return false
}
