package algo

import (
	"fmt"
	"slices"
)

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
// Adding an algorithm is a Kind above, a line here, a case in Limit.run
// and the file that defines its Algorithm and operations (docs/DESIGN.md
// "Adding an algorithm").
var kinds = [...]*Algorithm{
	FixedWindow:   &fixedWindow,
	SlidingLog:    &slidingLog,
	SlidingWindow: &slidingWindow,
	TokenBucket:   &tokenBucket,
	LeakyBucket:   &leakyBucket,
	Concurrency:   &concurrency,
}

// Algorithm describes one Kind: its names, the fields that configure it
// and its rules. The stores, the config decoder, the policy layer and the
// Valkey script builder read it, so an algorithm's name and rules are
// written once, in its own file, beside its operations (Limit.run).
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
	// Quota is how Limit.Quota derives q from the limit.
	Quota QuotaRule
	// WeighsNext marks a charge that still weighs in the next window (the
	// sliding counter's prev): a charged state is idle Period after its
	// ResetAfter (IdleAfterCharge).
	WeighsNext bool
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
	// Slices is how an allotment (a slice of a key's allowance an
	// instance takes from a shared store and spends locally) is cut for
	// this algorithm; SliceNone refuses allotments, for NoSlice's reason.
	Slices SliceRule
	// NoSlice is why allotments cannot be exact for this algorithm (shown
	// by validate), "" when Slices allows them.
	NoSlice string

	// params is Limit.String after the label ("10 r/s (burst 20)").
	params func(l *Limit) string
}

// QuotaRule is how an algorithm's quota q (Limit.Quota: requests accepted
// at one instant from idle) follows from its limit.
type QuotaRule uint8

// The quota rules.
const (
	// QuotaCount: q is Count (windows, Concurrency).
	QuotaCount QuotaRule = iota
	// QuotaBurst: q is Burst (the token bucket's capacity).
	QuotaBurst
	// QuotaBurstAndOne: q is Burst + 1 (nginx's burst is the excess
	// beyond the request that fills the bucket).
	QuotaBurstAndOne
)

// SliceRule is how an algorithm's allowance is cut into allotments
// (package allotment), and so which bound the fleet keeps.
type SliceRule uint8

// The slice rules.
const (
	// SliceNone: no allotments (Algorithm.NoSlice says why).
	SliceNone SliceRule = iota
	// SliceWindow: a slice is units of one window, charged to that
	// window and spent only while the window lasts: the fleet never
	// admits more than the limit in a window.
	SliceWindow
	// SliceBucket: a slice is tokens taken at once and spent within the
	// allotment's ttl: in any interval L at most B + rate·(L + ttl).
	SliceBucket
	// SliceCounter: as SliceWindow, a slice is units of one window's
	// count, spent only while the window lasts, but the next window's is
	// not taken ahead (its previous-window weight is this window's final
	// count): every admission passes the sliding counter's test on the
	// counts the fleet admitted.
	SliceCounter
)

// Windowed reports whether slices under r are units of one window (spent
// only while it lasts): SliceWindow and SliceCounter.
func (r SliceRule) Windowed() bool { return r == SliceWindow || r == SliceCounter }

// quota is q of l under rule r.
func (r QuotaRule) quota(l *Limit) int64 {
	switch r {
	case QuotaBurst:
		return l.Burst
	case QuotaBurstAndOne:
		return l.Burst + 1
	}
	return l.Count
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

// Charges reports whether ForceCharge changes the algorithm's state: all
// but those that count leases.
func (a *Algorithm) Charges() bool { return !a.Leases }

// Has reports whether field is one of a's config Fields.
func (a *Algorithm) Has(field string) bool { return slices.Contains(a.Fields, field) }

// String is the algorithm's name as `rlproxy compare` prints it ("fixed
// window", "sliding counter", …): its Label.
func (k Kind) String() string {
	if a := Describe(k); a != nil {
		return a.Label
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// op is one operation of an algorithm (Limit.run).
type op uint8

const (
	opDecide op = iota // DecideInto's decision of a cost ≤ quota
	opRefund           // RefundLease of a cost > 0
	opCharge           // ForceCharge of a cost in 1..quota
	opIdle             // the Unix ms at which s is idle (≤ now: idle)
)

// run performs operation o of l's algorithm, through the function of its
// file (fixedWindowOp, …), and returns the operation's number (0 for those
// that write *d or *s). It is the one switch over the kinds: the calls are
// static, so a caller's State and Decision stay on its stack (a call
// through a function value, such as a field of Algorithm, would move them
// to the heap: escape analysis cannot see through it, and the memory
// store's decisions would allocate).
func (l *Limit) run(o op, d *Decision, s *State, now, cost int64, lease string) int64 {
	switch l.Kind {
	case FixedWindow:
		return fixedWindowOp(o, l, d, s, now, cost, lease)
	case SlidingLog:
		return slidingLogOp(o, l, d, s, now, cost, lease)
	case SlidingWindow:
		return slidingWindowOp(o, l, d, s, now, cost, lease)
	case TokenBucket:
		return tokenBucketOp(o, l, d, s, now, cost, lease)
	case LeakyBucket:
		return leakyBucketOp(o, l, d, s, now, cost, lease)
	case Concurrency:
		return concurrencyOp(o, l, d, s, now, cost, lease)
	}
	return 0
}
