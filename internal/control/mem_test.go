package control

import (
	"context"
	"net/netip"
	"runtime"
	"strconv"
	"testing"
)

// BenchmarkEntriesMemory sets 1,000,000 entries in one policy (bans of
// API keys, the costlier kind: a hashed id per entry) and reports the
// heap they take per entry, and the cost of a Find that matches none with
// them present (b.Loop: the million are set once). Run it alone: go test
// -run '^$' -bench EntriesMemory ./internal/control (about 2 minutes).
func BenchmarkEntriesMemory(b *testing.B) {
	const n = 1_000_000
	c, err := New(Options{MaxEntries: n})
	if err != nil {
		b.Fatal(err)
	}
	c.Configure(testConfig(b, testYAML))
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		if _, err := c.Set(ctx, Request{Policy: "api", Key: "key-" + strconv.Itoa(i), Action: ActionBan, Reason: "load test"}, "bench"); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	t := c.Table("api")
	id := []byte("h:00000000000000000000000000000000")
	addr := netip.MustParseAddr("198.51.100.1")
	b.ResetTimer()
	for b.Loop() {
		if t.Find(id, addr, 0) != nil {
			b.Fatal("matched")
		}
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/entry")
	runtime.KeepAlive(c)
}

// BenchmarkFind is the decision path's lookup for a client without an
// entry: in a table without rules (one atomic load) and among 1,000,000
// hashed ids (the map lookup under the read lock).
func BenchmarkFind(b *testing.B) {
	for _, n := range []int{0, 1_000_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			t := newTable()
			for i := range n {
				t.add("h:"+strconv.FormatInt(int64(i), 16), &Rule{ID: strconv.Itoa(i), Action: ActionBan})
			}
			id := []byte("h:00000000000000000000000000000000")
			addr := netip.MustParseAddr("198.51.100.1")
			b.ReportAllocs()
			for b.Loop() {
				if t.Find(id, addr, 0) != nil {
					b.Fatal("matched")
				}
			}
		})
	}
}
