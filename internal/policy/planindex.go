package policy

import (
	"bytes"
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
// entries, sorted by sum, fall into buckets by their top bits: bucket b is
// entries[starts[b]:starts[b+1]], about two to four entries.
type planIndex struct {
	entries []planEntry
	starts  []uint32
	shift   uint // 64 - the bits of the bucket number (64: one bucket)
}

// newPlanIndex sorts entries (in place: the index keeps them) and builds
// the directory. len(entries) must fit a uint32 (PlanSet's compile checks).
func newPlanIndex(entries []planEntry) planIndex {
	slices.SortFunc(entries, func(a, b planEntry) int { return bytes.Compare(a.sum[:], b.sum[:]) })
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
