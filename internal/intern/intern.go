// Package intern turns byte keys into strings without allocating for keys
// seen recently: a request's store key is built in a reused buffer, and a
// client that comes back gets the string made for its last request.
package intern

import (
	"hash/maphash"
	"math/rand/v2"
	"sync/atomic"
	"unsafe"
)

// Slots is the number of keys a Cache can hold, in sets of Ways: a key
// goes to one set (by its hash) and, when the set is full, replaces one
// of its keys at random. With 1,000 keys in use about 1 % of lookups
// miss (a direct-mapped cache of as many slots missed 11–20 %).
const (
	Slots = 4096
	Ways  = 4
)

// MaxLen is the longest key a Cache remembers, in bytes; a longer one
// is converted afresh every time. With Slots it bounds what a Cache
// holds: 4096 entries of at most 258 bytes (288 with Go's size classes),
// about 1.2 MiB whatever clients send.
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
// is one (no allocation), otherwise a new one, remembered in b's set.
//
// A remembered entry is one allocation holding the key's length in two
// bytes and then its bytes; it is never written after it is published,
// so a reader that loads a slot sees a whole entry and the string it
// returns never changes. A miss costs the allocation string(b) would,
// two bytes larger (which can move it up one size class), plus the
// lookup.
func (c *Cache) String(b []byte) string {
	if len(b) == 0 || len(b) > MaxLen {
		return string(b)
	}
	i := int(maphash.Bytes(c.seed, b)%(Slots/Ways)) * Ways
	set := c.slots[i : i+Ways]
	free := -1
	for w := range set {
		p := set[w].Load()
		switch {
		case p == nil:
			if free < 0 {
				free = w
			}
		case entryLen(p) == len(b):
			if s := entryString(p); s == string(b) {
				return s
			}
		}
	}
	if free < 0 {
		free = rand.IntN(Ways)
	}
	e := make([]byte, 2+len(b))
	e[0], e[1] = byte(len(b)), byte(len(b)>>8)
	copy(e[2:], b)
	set[free].Store(&e[0])
	return entryString(&e[0])
}

// entryLen is the length of the key of the entry that starts at p.
func entryLen(p *byte) int {
	h := unsafe.Slice(p, 2)
	return int(h[0]) | int(h[1])<<8
}

// entryString is the key of the entry that starts at p.
func entryString(p *byte) string {
	return unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(p), 2)), entryLen(p))
}
