package memory

import (
	"unsafe"

	"rlproxy/internal/algo"
)

// slotBytes is one index slot's share per key: a 4-byte slab position in a
// table kept between 3/8 and 3/4 full, so at most 4 ÷ 3/8 ≈ 11 bytes; 8 is
// the middle of that range.
const slotBytes = 8

// mapEntryBytes is a side-map entry's share (16-byte key, 8-byte pointer,
// Go swiss-table control byte and load-factor slack), rounded up.
const mapEntryBytes = 40

// StateBytes returns the bytes the store keeps for key (0 when it tracks no
// such key): the fixed 56-byte slab entry plus its index slot share, and
// for sliding log and concurrency states the side-map entry, the
// algo.State and its backing arrays (8 bytes per log entry; lease ids
// counted by length). It is computed from the data structures' sizes, not
// measured; BenchmarkMemoryPerKey measures the heap per key (HeapInuse).
func (s *Store) StateBytes(key string) int64 {
	k := s.hash(key)
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, idx := sh.find(k)
	if idx == 0 {
		return 0
	}
	n := int64(unsafe.Sizeof(entry{})) + slotBytes
	if st, ok := sh.vars[k]; ok {
		n += mapEntryBytes + int64(unsafe.Sizeof(*st)) + int64(cap(st.Log))*8
		n += int64(cap(st.Leases)) * int64(unsafe.Sizeof(algo.Lease{}))
		for _, l := range st.Leases {
			n += int64(len(l.ID))
		}
	}
	return n
}
