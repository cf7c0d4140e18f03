package memory

import (
	"sync"
	"sync/atomic"

	"rlproxy/internal/algo"
)

// key is a state key hashed to 128 bits: h0 picks the shard (top bits),
// h1 the index slot (low bits). A struct, not a [2]uint64: Go passes and
// returns a two-field struct in registers, an array through memory.
type key struct{ h0, h1 uint64 }

// entry is one tracked key: 56 bytes whatever the key's length.
type entry struct {
	k       key
	a, b, c int64 // algo.State.A, B, C (unused for variable kinds)
	// meta is the Kind in the top 8 bits and, below, the Unix ms at which
	// the state is idle (expired; < 2^53).
	meta       uint64
	prev, next uint32 // LRU links (slab positions, 0 = the sentinel)
}

const metaShift = 56

func (e *entry) kind() algo.Kind { return algo.Kind(e.meta >> metaShift) }
func (e *entry) expiry() int64   { return int64(e.meta & (1<<metaShift - 1)) }
func (e *entry) setMeta(kind algo.Kind, expiry int64) {
	e.meta = uint64(kind)<<metaShift | uint64(expiry)
}

// The slab grows in chunks of 128 entries (7 KiB), so growth never copies
// entries and wastes at most one chunk per shard.
const (
	chunkBits = 7
	chunkSize = 1 << chunkBits
)

// shard is one lock stripe. All its fields are guarded by mu.
type shard struct {
	mu sync.Mutex
	// chunks is the slab; position 0 is the LRU list's sentinel: its next
	// is the most recently used entry, its prev the least.
	chunks [][]entry
	used   uint32 // positions handed out, sentinel included
	free   uint32 // head of the free list (linked by next), 0 = empty
	// slots is an open-addressing (linear probing) index of slab
	// positions, 0 = empty; its length is a power of two, at most 3/4 full.
	slots []uint32
	n     int           // tracked keys in this shard
	total *atomic.Int64 // tracked keys in the store
	// vars holds sliding log and concurrency states.
	vars map[key]*algo.State
	_    [64]byte // keep neighbouring shards' locks off one cache line
}

func (sh *shard) init(total *atomic.Int64) {
	sh.total = total
	sh.chunks = [][]entry{make([]entry, chunkSize)}
	sh.used = 1
	sh.slots = make([]uint32, 16)
	sh.vars = make(map[key]*algo.State)
}

// at is the entry at slab position idx.
func (sh *shard) at(idx uint32) *entry {
	return &sh.chunks[idx>>chunkBits][idx&(chunkSize-1)]
}

// find returns k's index slot and slab position, or the empty slot where
// it would go and position 0.
func (sh *shard) find(k key) (slot, idx uint32) {
	mask := uint32(len(sh.slots) - 1)
	for slot = uint32(k.h1) & mask; ; slot = (slot + 1) & mask {
		idx = sh.slots[slot]
		if idx == 0 || sh.at(idx).k == k {
			return slot, idx
		}
	}
}

// insert adds k, missing, whose empty slot find returned; it returns its
// new slab position, linked at the LRU front.
func (sh *shard) insert(slot uint32, k key) uint32 {
	if (sh.n+1)*4 > len(sh.slots)*3 {
		sh.grow()
		slot, _ = sh.find(k)
	}
	idx := sh.free
	if idx != 0 {
		sh.free = sh.at(idx).next
	} else {
		idx = sh.used
		sh.used++
		if int(idx>>chunkBits) == len(sh.chunks) {
			sh.chunks = append(sh.chunks, make([]entry, chunkSize))
		}
	}
	*sh.at(idx) = entry{k: k}
	sh.slots[slot] = idx
	sh.n++
	sh.total.Add(1)
	sentinel := sh.at(0)
	sh.link(idx, 0, sentinel.next)
	return idx
}

// grow doubles the index and re-places every entry.
func (sh *shard) grow() {
	old := sh.slots
	sh.slots = make([]uint32, 2*len(old))
	mask := uint32(len(sh.slots) - 1)
	for _, idx := range old {
		if idx == 0 {
			continue
		}
		slot := uint32(sh.at(idx).k.h1) & mask
		for sh.slots[slot] != 0 {
			slot = (slot + 1) & mask
		}
		sh.slots[slot] = idx
	}
}

// remove drops the entry at slab position idx (≠ 0) with its side state.
func (sh *shard) remove(idx uint32) {
	e := sh.at(idx)
	slot, _ := sh.find(e.k)
	sh.deleteSlot(slot)
	if isVar(e.kind()) {
		delete(sh.vars, e.k)
	}
	sh.unlink(idx)
	*e = entry{next: sh.free}
	sh.free = idx
	sh.n--
	sh.total.Add(-1)
}

// deleteSlot empties an index slot, shifting later entries of its probe run
// back so lookups need no tombstones (linear probing deletion).
func (sh *shard) deleteSlot(hole uint32) {
	mask := uint32(len(sh.slots) - 1)
	for j := (hole + 1) & mask; sh.slots[j] != 0; j = (j + 1) & mask {
		home := uint32(sh.at(sh.slots[j]).k.h1) & mask
		// The entry at j may fill the hole unless its home lies cyclically
		// in (hole, j].
		if (j-home)&mask >= (j-hole)&mask {
			sh.slots[hole] = sh.slots[j]
			hole = j
		}
	}
	sh.slots[hole] = 0
}

func (sh *shard) link(idx, prev, next uint32) {
	e := sh.at(idx)
	e.prev, e.next = prev, next
	sh.at(prev).next = idx
	sh.at(next).prev = idx
}

func (sh *shard) unlink(idx uint32) {
	e := sh.at(idx)
	sh.at(e.prev).next = e.next
	sh.at(e.next).prev = e.prev
}

// touch marks the entry at idx as recently used; 0 (untracked) is a no-op.
func (sh *shard) touch(idx uint32) {
	if idx != 0 {
		sh.toFront(idx)
	}
}

// toFront marks idx as the most recently used.
func (sh *shard) toFront(idx uint32) {
	if sh.at(0).next == idx {
		return
	}
	sh.unlink(idx)
	sh.link(idx, 0, sh.at(0).next)
}

// expireTail drops up to two idle entries from the LRU tail: a cheap,
// steady sweep on the decision path.
func (sh *shard) expireTail(now int64) {
	for range 2 {
		t := sh.at(0).prev
		if t == 0 || sh.at(t).expiry() > now {
			return
		}
		sh.remove(t)
	}
}

// sweep drops every entry idle at now and returns how many.
func (sh *shard) sweep(now int64) int {
	n := 0
	for idx := sh.at(0).prev; idx != 0; {
		prev := sh.at(idx).prev
		if sh.at(idx).expiry() <= now {
			sh.remove(idx)
			n++
		}
		idx = prev
	}
	return n
}

// setIdle records the new idle time of the variable state st at slab
// position idx (after a release), dropping it when st is idle already.
func (sh *shard) setIdle(idx uint32, l *algo.Limit, st *algo.State, now int64) {
	idle := l.IdleMillis(st, now)
	if idle == 0 {
		sh.remove(idx)
		return
	}
	sh.at(idx).setMeta(l.Kind, now+idle)
}
