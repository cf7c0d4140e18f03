// Package store defines the interface between rlproxy's policy layer and the
// place where limiter state lives: in process (package store/memory) or in a
// shared Valkey (package store/valkey).
package store

import (
	"context"

	"rlproxy/internal/algo"
)

// KeyVersion is the state layout's version segment of every key, right
// after the key prefix. A release that changes how any algorithm's state
// reads gets a new one, so a fleet running two releases side by side
// during a rolling upgrade keeps two sets of state instead of misreading
// the other's. v2: a token bucket's state may hold a debt (its deficit A
// below 0, algo.Limit.ForceCharge), which a v1 reader took for a full
// bucket; calendar windows (their own algorithm codes) arrived with it.
const KeyVersion = "v2:"

// Check is one policy's part of a decision.
type Check struct {
	// Key is the full state key: key prefix, version, the client in a hash tag,
	// then the policy, e.g. "rl:v2:{ip:192.0.2.7}:api". Checks of one client
	// with the same key source share the hash tag, hence one Cluster slot.
	Key string
	// Limit is the policy's compiled limit.
	Limit algo.Limit
	// Cost is requests charged (>= 1); 0 peeks without charging.
	Cost int64
	// Lease identifies the in-flight request for Concurrency limits (unique per
	// request); empty for every other kind.
	Lease string
	// Allot, when not nil, lets an allotment layer (package allotment)
	// decide the check from a slice of the key's allowance it holds;
	// nil decides every request in the store.
	Allot *Allotment
}

// Allotment is one policy's `allotment:` option: how large a slice of a
// key's allowance an instance may hold, and for how long.
type Allotment struct {
	// Policy names the policy, for the metrics.
	Policy string
	// MaxFraction is the largest part of what is left that one slice
	// takes, in thousandths (1..1000).
	MaxFraction int64
	// TTL is how long a slice may be spent, in ms from the local send of
	// its fetch; then its unused units go back.
	TTL int64
}

// Store decides requests against limiter state.
type Store interface {
	// Decide runs all checks as one atomic decision at time now (Unix ms; 0
	// means the store's own clock: the memory store's monotonic-advanced wall
	// clock, Valkey's TIME) and writes one decision per check into out, which
	// must have len(checks). If any check refuses, none is charged and the
	// accepted ones report their uncharged state (as with Cost 0).
	// It returns the time used (Unix ms). An error means no decision was
	// made (store unreachable, timeout); out is then undefined.
	Decide(ctx context.Context, checks []Check, now int64, out []algo.Decision) (int64, error)
	// Release ends the Concurrency leases among checks (other kinds are
	// ignored). It is called when the proxied request completes.
	Release(ctx context.Context, checks []Check) error
	// Refund undoes exactly the charge of a Decide that accepted these
	// checks (same keys, limits, costs and leases) at now, the time that
	// Decide returned, whatever other requests charged since: the proxy
	// calls it when it refuses a request the policies had accepted (the
	// shaping caps, server.max_wait and server.max_waiting), so that a
	// refused request is charged by none. Concurrency leases among checks
	// are released. Checks of cost 0 are ignored. The inverse per algorithm
	// is algo.Limit.RefundLease (floors included). An error means the
	// refund may not have run; the charge then stands until it expires.
	Refund(ctx context.Context, checks []Check, now int64) error
	// Charge adds each check's Cost to its state at now (0: the store's
	// clock) unconditionally: nothing is refused, and a bucket may go into
	// debt that its refill repays before it accepts again. The policy layer
	// charges with it the cost a response reported beyond what its request
	// was charged when decided (a route's cost_response_header). Per
	// algorithm it is algo.Limit.ForceCharge (caps included); Concurrency
	// checks and checks of cost 0 are ignored. An error means the charge
	// may not have run.
	Charge(ctx context.Context, checks []Check, now int64) error
	// Close releases connections and background goroutines.
	Close() error
}
