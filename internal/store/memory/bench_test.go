package memory

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// benchLimits are generous (30M per hour, valid for algo.Validate), so a
// hot key keeps being accepted and charged for a whole benchmark, and a key
// touched once stays tracked for seconds.
var benchLimits = []algo.Limit{
	{Kind: algo.FixedWindow, Count: 30_000_000, Period: hour},
	{Kind: algo.SlidingWindow, Count: 30_000_000, Period: hour},
	{Kind: algo.TokenBucket, Count: 30_000_000, Period: hour, Burst: 30_000_000},
	{Kind: algo.LeakyBucket, Count: 30_000_000, Period: hour, Burst: 29_999_999, NoDelay: true},
	{Kind: algo.SlidingLog, Count: 1000, Period: 1000},
}

const hour = 3_600_000

// ipKeys returns n distinct IPv4 client keys.
func ipKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("rl:v2:{ip:10.%d.%d.%d}:api", i>>16&255, i>>8&255, i&255)
	}
	return keys
}

// BenchmarkDecide measures one single-check decision reading the store's
// clock (now = 0), on one hot key and over 1M keys, serial and parallel.
func BenchmarkDecide(b *testing.B) {
	keys := ipKeys(1 << 20)
	for _, l := range benchLimits {
		for _, spread := range []int{1, len(keys)} {
			for _, parallel := range []bool{false, true} {
				name := fmt.Sprintf("%s/keys=%d/parallel=%v", l.Kind, spread, parallel)
				if l.Kind == algo.SlidingLog && spread > 1 {
					continue // variable state: not on the fixed-size fast path
				}
				b.Run(name, func(b *testing.B) { benchDecide(b, l, keys[:spread], parallel) })
			}
		}
	}
}

func benchDecide(b *testing.B, l algo.Limit, keys []string, parallel bool) {
	s := New(Options{MaxKeys: len(keys), SweepInterval: -1})
	defer s.Close()
	ctx := context.Background()
	run := func(i int, checks []store.Check, out []algo.Decision) {
		checks[0].Key = keys[i%len(keys)]
		if _, err := s.Decide(ctx, checks, 0, out); err != nil {
			b.Fatal(err)
		}
	}
	mk := func() ([]store.Check, []algo.Decision) {
		return []store.Check{{Limit: l, Cost: 1}}, make([]algo.Decision, 1)
	}
	b.ReportAllocs()
	if !parallel {
		checks, out := mk()
		i := 0
		for b.Loop() {
			run(i, checks, out)
			i++
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		checks, out := mk()
		i := int(time.Now().UnixNano()) & 0xffff
		for pb.Next() {
			run(i, checks, out)
			i += 7919 // a prime stride: goroutines spread over keys
		}
	})
}

// BenchmarkXTimeRate is the yardstick: golang.org/x/time/rate Limiter.Allow
// (which reads time.Now) on one limiter, serial and parallel.
func BenchmarkXTimeRate(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		b.Run(fmt.Sprintf("parallel=%v", parallel), func(b *testing.B) {
			lim := rate.NewLimiter(rate.Limit(1e9), 1_000_000)
			b.ReportAllocs()
			if !parallel {
				for b.Loop() {
					lim.Allow()
				}
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					lim.Allow()
				}
			})
		})
	}
}

// BenchmarkMemoryPerKey reports the heap (HeapInuse) per tracked IPv4
// client: 1M token bucket keys in a store with MaxKeys 1M (bytes/key), and
// the time that fill took per key (fill-ns/key). The fill runs once, before
// the (empty) timed loop: repeating a ~1 s fill per iteration made
// -benchtime 100x (CI) take over a minute for the same figure. ns/op is
// therefore not reported.
func BenchmarkMemoryPerKey(b *testing.B) {
	const n = 1_000_000
	t0 := time.Now()
	perKey := memoryPerKey(b, n)
	fill := time.Since(t0)
	for b.Loop() {
	}
	b.ReportMetric(perKey, "bytes/key")
	b.ReportMetric(float64(fill.Nanoseconds())/n, "fill-ns/key")
	b.ReportMetric(0, "ns/op") // 0 hides it: the loop measures nothing
}

// memoryPerKey fills a fresh store with n IPv4 client keys and returns its
// HeapInuse growth per key.
func memoryPerKey(tb testing.TB, n int) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := New(Options{MaxKeys: n, SweepInterval: -1})
	// The field's hourly quota: state stays for an hour, nothing expires.
	l := algo.Limit{Kind: algo.TokenBucket, Count: 100, Period: hour, Burst: 100}
	checks := []store.Check{{Limit: l, Cost: 1}}
	out := make([]algo.Decision, 1)
	buf := make([]byte, 0, 64)
	for i := range n {
		buf = append(buf[:0], "rl:v2:{ip:10."...)
		buf = strconv.AppendInt(buf, int64(i>>16&255), 10)
		buf = append(buf, '.')
		buf = strconv.AppendInt(buf, int64(i>>8&255), 10)
		buf = append(buf, '.')
		buf = strconv.AppendInt(buf, int64(i&255), 10)
		buf = append(buf, "}:api"...)
		checks[0].Key = string(buf)
		if _, err := s.Decide(context.Background(), checks, 0, out); err != nil {
			tb.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if s.Len() != n {
		tb.Fatalf("Len %d, want %d", s.Len(), n)
	}
	perKey := float64(after.HeapInuse-before.HeapInuse) / float64(n)
	runtime.KeepAlive(s)
	s.Close()
	return perKey
}

// The bucket and window kinds decide without allocating.
func TestHotPathAllocationFree(t *testing.T) {
	keys := ipKeys(1000)
	for _, l := range benchLimits[:4] {
		s := newStore(t, 0)
		checks := []store.Check{{Limit: l, Cost: 1}, {Limit: l, Cost: 1}}
		out := make([]algo.Decision, 2)
		i := 0
		allocs := testing.AllocsPerRun(1000, func() {
			checks[0].Key, checks[1].Key = keys[i%len(keys)], keys[(i+1)%len(keys)]
			i++
			if _, err := s.Decide(context.Background(), checks, 0, out); err != nil {
				t.Fatal(err)
			}
		})
		// Growth of the slab and index is amortised to well under one.
		if allocs > 0.05 {
			t.Errorf("%v: %.2f allocs per decision, want 0", &l, allocs)
		}
	}
}

// BenchmarkVsXTimeRate times one hot-key token bucket decision and one
// x/time/rate Allow in alternating blocks of 1000, both reading the clock,
// so machine noise hits both alike; it reports each one's ns/op and their
// ratio (target ≤ 1).
func BenchmarkVsXTimeRate(b *testing.B) {
	const block = 1000
	s := New(Options{SweepInterval: -1})
	defer s.Close()
	lim := rate.NewLimiter(rate.Limit(1e9), 1_000_000)
	checks := []store.Check{{Key: "rl:v2:{ip:192.0.2.7}:api", Limit: benchLimits[2], Cost: 1}}
	out := make([]algo.Decision, 1)
	ctx := context.Background()
	var ours, theirs time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		for range block {
			if _, err := s.Decide(ctx, checks, 0, out); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		for range block {
			lim.Allow()
		}
		ours += t1.Sub(t0)
		theirs += time.Since(t1)
		n += block
	}
	b.ReportMetric(float64(ours.Nanoseconds())/float64(n), "rlproxy-ns/op")
	b.ReportMetric(float64(theirs.Nanoseconds())/float64(n), "xrate-ns/op")
	b.ReportMetric(float64(ours)/float64(theirs), "ratio")
}
