// Package topk finds the ids seen most often in a stream with memory fixed
// in advance, whatever the number of distinct ids: the space-saving
// algorithm of Metwally, Agrawal and El Abbadi ("Efficient Computation of
// Frequent and Top-k Elements in Data Streams", ICDT 2005).
//
// A Sketch of capacity k keeps k counters. An id already counted gets +1;
// a new id takes over the smallest counter, inheriting its count (+1) and
// recording that count as its error. Hence, over a stream of N additions:
//
//   - every counted id's true count c satisfies Count−Err ≤ c ≤ Count;
//   - Err ≤ N/k, so an id seen more than N/k times is always counted;
//   - an id not counted was seen at most Min() times.
//
// rlproxy feeds it the clients its policies refuse (internal/live), so the
// admin page can name the heaviest of them without one counter per client.
package topk

import (
	"hash/maphash"
)

// MaxIDLen is the longest id kept, in bytes; longer ids are cut to it.
// Client ids are at most 46 bytes (clientkey.MaxLen).
const MaxIDLen = 48

// counter is one counted id.
type counter struct {
	id    [MaxIDLen]byte
	n     uint8 // bytes of id in use
	count uint64
	err   uint64
	hash  uint64
	pos   int32 // index in Sketch.heap
}

// Sketch is a space-saving summary of capacity k. It is not safe for
// concurrent use (Window locks around it). Add does not allocate.
type Sketch struct {
	seed  maphash.Seed
	items []counter // at most k, in arrival order
	heap  []int32   // indices into items, a min-heap by count
	table []int32   // open addressing by hash: item index + 1, 0 = empty
	total uint64
}

// NewSketch returns an empty Sketch of k counters (k ≥ 1). Its memory is
// about 100·k bytes (88 per counter, 12 of index), allocated here once.
func NewSketch(k int) *Sketch {
	k = max(k, 1)
	slots := 1
	for slots < 2*k { // load factor ≤ 1/2 keeps probes short
		slots <<= 1
	}
	return &Sketch{
		seed:  maphash.MakeSeed(),
		items: make([]counter, 0, k),
		heap:  make([]int32, 0, k),
		table: make([]int32, slots),
	}
}

// Add counts one occurrence of id.
func (s *Sketch) Add(id string) {
	if len(id) > MaxIDLen {
		id = id[:MaxIDLen]
	}
	s.total++
	h := maphash.String(s.seed, id)
	slot, found := s.find(h, id)
	if found {
		c := &s.items[s.table[slot]-1]
		c.count++
		s.down(int(c.pos))
		return
	}
	if len(s.items) < cap(s.items) {
		i := len(s.items)
		s.items = append(s.items, counter{count: 1, hash: h, pos: int32(len(s.heap))})
		s.set(&s.items[i], id)
		s.table[slot] = int32(i + 1)
		s.heap = append(s.heap, int32(i))
		s.up(len(s.heap) - 1)
		return
	}
	// Replace the minimum: the new id inherits its count as error.
	i := s.heap[0]
	c := &s.items[i]
	s.remove(c.hash, i)
	c.err = c.count
	c.count++
	c.hash = h
	s.set(c, id)
	slot, _ = s.find(h, id) // the removal may have moved entries
	s.table[slot] = i + 1
	s.down(0)
}

func (s *Sketch) set(c *counter, id string) {
	c.n = uint8(copy(c.id[:], id))
}

// find returns the slot holding id, or the empty slot where it would go.
func (s *Sketch) find(h uint64, id string) (int, bool) {
	mask := len(s.table) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		v := s.table[i]
		if v == 0 {
			return i, false
		}
		c := &s.items[v-1]
		if c.hash == h && string(c.id[:c.n]) == id {
			return i, true
		}
	}
}

// remove deletes item idx (whose hash is h) from the table by backward
// shift, so probe sequences stay unbroken without tombstones.
func (s *Sketch) remove(h uint64, idx int32) {
	mask := len(s.table) - 1
	i := int(h) & mask
	for s.table[i] != idx+1 {
		i = (i + 1) & mask
	}
	for j := i; ; {
		s.table[i] = 0
		for {
			j = (j + 1) & mask
			v := s.table[j]
			if v == 0 {
				return
			}
			home := int(s.items[v-1].hash) & mask
			// The entry at j may move to i unless its home lies in (i, j].
			if (i <= j && (home <= i || home > j)) || (i > j && home <= i && home > j) {
				s.table[i] = v
				i = j
				break
			}
		}
	}
}

func (s *Sketch) less(a, b int) bool {
	return s.items[s.heap[a]].count < s.items[s.heap[b]].count
}

func (s *Sketch) swap(a, b int) {
	s.heap[a], s.heap[b] = s.heap[b], s.heap[a]
	s.items[s.heap[a]].pos = int32(a)
	s.items[s.heap[b]].pos = int32(b)
}

func (s *Sketch) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *Sketch) down(i int) {
	n := len(s.heap)
	for {
		m, l, r := i, 2*i+1, 2*i+2
		if l < n && s.less(l, m) {
			m = l
		}
		if r < n && s.less(r, m) {
			m = r
		}
		if m == i {
			return
		}
		s.swap(i, m)
		i = m
	}
}

// Reset empties the sketch, keeping its memory.
func (s *Sketch) Reset() {
	s.items, s.heap, s.total = s.items[:0], s.heap[:0], 0
	clear(s.table)
}

// Total is the number of additions since the last Reset (N).
func (s *Sketch) Total() uint64 { return s.total }

// Min is the largest count an id not in the sketch can have: the smallest
// counter once all k are in use, else 0.
func (s *Sketch) Min() uint64 {
	if len(s.items) < cap(s.items) || len(s.heap) == 0 {
		return 0
	}
	return s.items[s.heap[0]].count
}

// Each calls f for every counted id with its count and error bound.
func (s *Sketch) Each(f func(id string, count, err uint64)) {
	for i := range s.items {
		c := &s.items[i]
		f(string(c.id[:c.n]), c.count, c.err)
	}
}
