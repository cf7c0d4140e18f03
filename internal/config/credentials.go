package config

import (
	"hash/maphash"
	"iter"
)

// Credentials is a plans section's credential → plan mapping, inline keys
// then the keys_file's, in file order: one slice of 24 bytes a credential,
// where a map[string]string took about 55 (bench/configmem.sh). A flat
// keys_file's credentials are substrings of its bytes, never copies.
// A repeated credential is refused (inline ones as they are added, a flat
// keys_file's by one check after reading it), so a valid config holds each
// credential once.
type Credentials struct {
	list  []credential
	plans []string // the section's plan names: credential.plan indexes it
}

// credential is one credential and the index of its plan's name.
type credential struct {
	key  string
	plan uint32
}

// Len is how many credentials there are.
func (c *Credentials) Len() int { return len(c.list) }

// All yields each credential and its plan's name.
func (c *Credentials) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, e := range c.list {
			if !yield(e.key, c.plans[e.plan]) {
				return
			}
		}
	}
}

// add appends key → plans[plan]; plans is the section's list of plan
// names (the same slice at every call).
func (c *Credentials) add(key string, plan int, plans []string) {
	c.plans = plans
	c.list = append(c.list, credential{key, uint32(plan)})
}

// repeated reports whether two of list's credentials are equal. It uses
// an open-addressing set of 8-byte slots (a hash tag and a list index;
// at most two thirds full), not a map of the strings: 13 bytes a
// credential for the duration of the check. list holds under 2³²
// credentials (a keys_file of ≥ 5 bytes a line under 20 GB).
func repeated(list []credential) bool {
	size := uint64(1)
	for size < uint64(len(list)+len(list)/2) {
		size <<= 1
	}
	slots := make([]uint64, size) // hash tag << 32 | list index + 1; 0 is empty
	seed := maphash.MakeSeed()
	for i, e := range list {
		h := maphash.String(seed, e.key)
		tag := h &^ (1<<32 - 1)
		for j := h & (size - 1); ; j = (j + 1) & (size - 1) {
			if slots[j] == 0 {
				slots[j] = tag | uint64(i+1)
				break
			}
			if slots[j]&^(1<<32-1) == tag && list[slots[j]&(1<<32-1)-1].key == e.key {
				return true
			}
		}
	}
	return false
}
