package intern

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// TestStringRemembers: the same bytes give the same string (the same
// memory) without allocating, from a buffer the caller then overwrites;
// other bytes give their own string.
func TestStringRemembers(t *testing.T) {
	c := New()
	buf := []byte("rl:{203.0.113.7}:api")
	first := c.String(buf)
	if first != "rl:{203.0.113.7}:api" {
		t.Fatalf("got %q", first)
	}
	again := c.String(buf)
	if unsafe.StringData(again) != unsafe.StringData(first) {
		t.Fatal("the same bytes made a second string")
	}
	if n := testing.AllocsPerRun(100, func() { c.String(buf) }); n != 0 {
		t.Fatalf("a remembered key allocated %v times", n)
	}
	copy(buf, "rl:{198.51.100.9}:ap")
	if first != "rl:{203.0.113.7}:api" {
		t.Fatalf("the remembered string changed with the caller's buffer: %q", first)
	}
	if got := c.String(buf); got != "rl:{198.51.100.9}:ap" {
		t.Fatalf("other bytes gave %q", got)
	}
	if got := c.String(nil); got != "" {
		t.Fatalf("no bytes gave %q", got)
	}
}

// TestStringSlotCollisions: keys that share a slot replace each other and
// each still gets its own value; a key longer than MaxLen is converted.
func TestStringSlotCollisions(t *testing.T) {
	c := New()
	for round := range 3 {
		for i := range 3 * Slots {
			k := fmt.Sprintf("key-%d", i)
			if got := c.String([]byte(k)); got != k {
				t.Fatalf("round %d: %q gave %q", round, k, got)
			}
		}
	}
	long := strings.Repeat("x", MaxLen+1)
	if got := c.String([]byte(long)); got != long {
		t.Fatalf("a %d-byte key came back %d bytes long", len(long), len(got))
	}
}

// TestStringConcurrent: goroutines interning keys that collide see only
// their own keys' values (run with -race).
func TestStringConcurrent(t *testing.T) {
	c := New()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 32)
			for i := range 20_000 {
				buf = fmt.Appendf(buf[:0], "g%d-%d", g, i%(2*Slots))
				if got := c.String(buf); got != string(buf) {
					t.Errorf("%q gave %q", buf, got)
					return
				}
			}
		}()
	}
	wg.Wait()
}
