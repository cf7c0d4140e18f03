package policy

import (
	"encoding/binary"
	"slices"

	"rlproxy/internal/clientkey"
)

// planEntry is one hashed credential and its plan (an index in
// PlanSet.plans): 20 bytes, where a map of "h:…" id strings to plan
// pointers cost ≈ 90 (the 48-byte id allocation, the slot, the map's
// spare capacity).
type planEntry struct {
	sum  clientkey.Sum
	plan uint32
}

// planIndex finds a credential's plan among millions with one directory
// read and a scan of a few entries. Sums are uniform (HMAC output), so the
// entries, grouped by the top bits of their sum, fall into buckets of about
// two to four entries: bucket b is entries[starts[b]:starts[b+1]].
type planIndex struct {
	entries []planEntry
	starts  []uint32
	shift   uint // 64 - the bits of the bucket number (64: one bucket)
}

// newPlanIndex groups entries by bucket (in place: the index keeps them)
// and builds the directory. len(entries) must fit a uint32 (PlanSet's
// compile checks). The grouping is a one-pass in-place permutation
// (American flag sort's), each entry swapped at most once into its bucket:
// a comparison sort of a million entries took four times as long.
func newPlanIndex(entries []planEntry) planIndex {
	bits := uint(0)
	for 4<<bits < len(entries) {
		bits++
	}
	x := planIndex{entries: entries, starts: make([]uint32, 1<<bits+1), shift: 64 - bits}
	for _, e := range entries {
		x.starts[x.bucket(e.sum)+1]++
	}
	for b := 1; b < len(x.starts); b++ {
		x.starts[b] += x.starts[b-1]
	}
	next := slices.Clone(x.starts[:len(x.starts)-1]) // each bucket's first slot not yet filled
	for b := range next {
		for next[b] < x.starts[b+1] {
			e := entries[next[b]]
			t := x.bucket(e.sum)
			if t != uint64(b) {
				entries[next[b]], entries[next[t]] = entries[next[t]], e
			}
			next[t]++
		}
	}
	return x
}

// bucket is the bucket of s: its top bits (a shift of 64 gives 0).
func (x *planIndex) bucket(s clientkey.Sum) uint64 {
	return binary.BigEndian.Uint64(s[:8]) >> x.shift
}

// lookup returns the plan of s, ok false for an unknown credential.
func (x *planIndex) lookup(s clientkey.Sum) (plan uint32, ok bool) {
	b := x.bucket(s)
	for _, e := range x.entries[x.starts[b]:x.starts[b+1]] {
		if e.sum == s {
			return e.plan, true
		}
	}
	return 0, false
}
