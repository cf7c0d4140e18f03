package algo

import "fmt"

// Kind names an algorithm.
type Kind uint8

// The algorithms, numbered as the stores keep them (the memory store's
// entries, the Valkey script's kind argument): a new one takes the next
// number. Each is described by its Algorithm, in its own file.
const (
	// FixedWindow counts requests in epoch-aligned windows of Period ms.
	FixedWindow Kind = iota + 1
	// SlidingLog keeps the time of every accepted request in the last Period ms.
	SlidingLog
	// SlidingWindow is the sliding window counter (Cloudflare 2017): the
	// previous window's count weighted by the part of it still inside the window.
	SlidingWindow
	// TokenBucket holds Burst tokens, refilled at Count per Period ms.
	TokenBucket
	// LeakyBucket is nginx limit_req (GCRA): excess drains at Count per Period
	// ms; Burst excess requests are accepted, delayed unless NoDelay.
	LeakyBucket
	// Concurrency limits in-flight requests per key to Count (leases).
	Concurrency
)

// kinds is every algorithm's descriptor, indexed by its Kind (0: none).
// Adding an algorithm is a Kind above, a line here and the file that
// defines its Algorithm (docs/DESIGN.md "Adding an algorithm").
var kinds = [...]*Algorithm{
	FixedWindow:   &fixedWindow,
	SlidingLog:    &slidingLog,
	SlidingWindow: &slidingWindow,
	TokenBucket:   &tokenBucket,
	LeakyBucket:   &leakyBucket,
	Concurrency:   &concurrency,
}

// Algorithm describes one Kind: its names, the fields that configure it
// and its operations. The stores, the config decoder, the policy layer and
// the Valkey script builder read it, so an algorithm's name and rules are
// written once, in its own file.
type Algorithm struct {
	Kind Kind
	// Name is the config's `algorithm:` value ("token_bucket"); the Valkey
	// script's file (lua/<Name>.lua) and functions (<Name>, refund_<Name>,
	// charge_<Name>, quota_<Name>) carry it too.
	Name string
	// Label is Kind.String: the name `rlproxy compare` and logs print
	// ("token bucket").
	Label string
	// Code is the store key's algorithm code ("tb"), unique: keys of two
	// algorithms never meet.
	Code string
	// Listed is the algorithm's place in docs/CONTRACT.md's list (the
	// config schema's order), from 1.
	Listed int
	// Fields are the config fields only this algorithm takes (besides the
	// fields every policy has); Required those of them it cannot do
	// without (window or calendar is checked apart).
	Fields, Required []string
	// MaxCount is the largest Count (MaxCountFor).
	MaxCount int64
	// MinBurst is the smallest Burst; Burst applies when "burst" is a Field.
	MinBurst int64
	// Bucket marks bucket arithmetic (units of Period per request), whose
	// Count·Period and Burst·Period Validate bounds by MaxUnits.
	Bucket bool
	// Var marks state of variable size (State.Log or State.Leases), which a
	// store keeps apart from the three numbers A, B and C.
	Var bool
	// Leases marks counting of requests in flight: a cost > 0 acquires one
	// lease whatever the cost, so the quota never refuses it and nothing is
	// charged unconditionally.
	Leases bool

	quota  func(l *Limit) int64
	decide func(l *Limit, d *Decision, s *State, now, cost int64, lease string)
	refund func(l *Limit, s *State, now, cost int64, lease string)
	// charge is ForceCharge of a cost at most the quota; nil: none.
	charge func(l *Limit, s *State, now, cost int64)
	idle   func(l *Limit, s *State, now int64) int64
	// idleAfter is IdleAfterCharge; nil: the decision's ResetAfter.
	idleAfter func(l *Limit, d *Decision) int64
	// params is Limit.String after the label ("10 r/s (burst 20)").
	params func(l *Limit) string
}

// Kinds returns every algorithm's descriptor in Kind order. The
// descriptors are shared: do not change them.
func Kinds() []*Algorithm {
	return kinds[1:]
}

// Describe returns k's descriptor, nil for an unknown Kind.
func Describe(k Kind) *Algorithm {
	if int(k) < len(kinds) {
		return kinds[k]
	}
	return nil
}

// Charges reports whether ForceCharge changes the algorithm's state (all
// but Concurrency).
func (a *Algorithm) Charges() bool { return a.charge != nil }

// Has reports whether field is one of a's config Fields.
func (a *Algorithm) Has(field string) bool {
	for _, f := range a.Fields {
		if f == field {
			return true
		}
	}
	return false
}

// String is the algorithm's name as `rlproxy compare` prints it ("fixed
// window", "sliding counter", …): its Label.
func (k Kind) String() string {
	if a := Describe(k); a != nil {
		return a.Label
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}
