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
