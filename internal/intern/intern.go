// Package intern turns byte keys into strings without allocating for keys
// seen recently: a request's store key is built in a reused buffer, and a
// client that comes back gets the string made for its last request.
package intern

import (
	"hash/maphash"
	"sync/atomic"
	"unsafe"
)

// Slots is the number of keys a Cache remembers (direct-mapped: a key
// replaces whichever key hashed to its slot before).
const Slots = 4096

// MaxLen is the longest key a Cache remembers, in bytes; a longer one
// is converted afresh every time. With Slots it bounds what a Cache
// holds to about 1 MiB whatever clients send.
const MaxLen = 256

// Cache is a fixed-size, lock-free cache of strings keyed by their bytes.
// The zero value is not usable: call New. It is safe for concurrent use.
type Cache struct {
	seed  maphash.Seed
	slots [Slots]atomic.Pointer[byte]
}

// New returns an empty Cache.
func New() *Cache { return &Cache{seed: maphash.MakeSeed()} }

// String returns string(b): the string remembered for b's bytes if there
// is one (no allocation), otherwise a new one, remembered in b's slot.
//
// A remembered entry is one allocation holding the key's length in two
// bytes and then its bytes; it is never written after it is published,
// so a reader that loads the slot sees a whole entry and the string it
// returns never changes.
func (c *Cache) String(b []byte) string {
	if len(b) == 0 || len(b) > MaxLen {
		return string(b)
	}
	slot := &c.slots[maphash.Bytes(c.seed, b)%Slots]
	if p := slot.Load(); p != nil {
		if s := entryString(p); s == string(b) {
			return s
		}
	}
	e := make([]byte, 2+len(b))
	e[0], e[1] = byte(len(b)), byte(len(b)>>8)
	copy(e[2:], b)
	slot.Store(&e[0])
	return entryString(&e[0])
}

// entryString is the key of the entry that starts at p.
func entryString(p *byte) string {
	h := unsafe.Slice(p, 2)
	n := int(h[0]) | int(h[1])<<8
	return unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(p), 2)), n)
}
