package valkey

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/testutil/redisserver"
)

// benchBucket is the benchmarks' token bucket: 30M per hour with a burst of
// 30M, so a hot key is accepted (and charged) for a whole run. bench/valkey.sh
// passes the same numbers to redis-benchmark's EVALSHA.
var benchBucket = algo.Limit{Kind: algo.TokenBucket, Count: 30_000_000, Period: 3_600_000, Burst: 30_000_000}

// benchDistinctKeys is the distinct-key space: redis-benchmark -r 1000000
// draws __rand_int__ from the same range, formatted the same way (%012d).
const benchDistinctKeys = 1_000_000

// benchHotKey is the one key of the hot-key runs (also in bench/valkey.sh).
const benchHotKey = "rl:v2:{ip:192.0.2.7}:api"

// BenchmarkValkeyDecide measures single-check token bucket decisions per
// second (metric decisions/s) through Store.Decide — valkey-go, EVALSHA of
// the one decision script, reply parsing — with 1 to 256 concurrent callers
// sharing one Store, on distinct keys and on one hot key. Each caller is one
// goroutine; together they make exactly b.N decisions, whatever GOMAXPROCS.
//
// The server is RLPROXY_BENCH_VALKEY ("host:port", e.g. a redis-server that
// bench/valkey.sh pinned to another core) or else a redis-server started
// here (unpinned: a smoke run, as in CI). bench/valkey.sh sets the figures
// beside redis-benchmark's EVALSHA ceiling of the same script.
func BenchmarkValkeyDecide(b *testing.B) {
	addr := os.Getenv("RLPROXY_BENCH_VALKEY")
	if addr == "" {
		addr = redisserver.Start(b).Addr
	}
	st, err := New(context.Background(), Options{Addrs: []string{addr}, KeyPrefix: "rl:", Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	distinct := make([]string, benchDistinctKeys)
	for i := range distinct {
		distinct[i] = fmt.Sprintf("rl:v2:{ip:%012d}:api", i)
	}
	for _, ks := range []struct {
		name string
		keys []string
	}{{"distinct", distinct}, {"hot", []string{benchHotKey}}} {
		for _, callers := range []int{1, 4, 16, 64, 256} {
			b.Run(fmt.Sprintf("keys=%s/callers=%d", ks.name, callers), func(b *testing.B) {
				benchValkeyCallers(b, st, ks.keys, callers)
			})
		}
	}
}

// benchValkeyCallers makes b.N decisions from callers goroutines, key i
// being keys[i % len(keys)], and reports decisions/s over the wall time.
func benchValkeyCallers(b *testing.B, st *Store, keys []string, callers int) {
	ctx := context.Background()
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range callers {
		wg.Go(func() {
			checks := []store.Check{{Limit: benchBucket, Cost: 1}}
			out := make([]algo.Decision, 1)
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				checks[0].Key = keys[i%int64(len(keys))]
				if _, err := st.Decide(ctx, checks, 0, out); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				if !out[0].Allowed {
					err := fmt.Errorf("decision %d on %s refused: the benchmark limit is too small", i, checks[0].Key)
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
}

// BenchmarkValkeyMemoryPerClient fills a fresh redis-server with 100k
// clients' token bucket state (100 per hour, so nothing expires during the
// run; keys shaped like the memory store's benchmark, rl:v2:{ip:10.x.y.z}:api)
// and reports the server's INFO used_memory growth per client
// (used-bytes/client, allocator overhead and the main dict included) and
// MEMORY USAGE SAMPLES 0 of one client's key (key-bytes/client). The fill
// runs once, before the (empty) timed loop; ns/op is not reported. The
// figures depend on the server version and its allocator.
func BenchmarkValkeyMemoryPerClient(b *testing.B) {
	const n = 100_000
	srv := redisserver.Start(b)
	st, err := New(context.Background(), Options{Addrs: []string{srv.Addr}, KeyPrefix: "rl:", Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	c, err := st.Client(ctx)
	if err != nil {
		b.Fatal(err)
	}
	usedMemory := func() int64 {
		info, err := c.Do(ctx, c.B().Info().Section("memory").Build()).ToString()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					b.Fatal(err)
				}
				return n
			}
		}
		b.Fatal("INFO memory: no used_memory")
		return 0
	}
	key := func(i int) string {
		return fmt.Sprintf("rl:v2:{ip:10.%d.%d.%d}:api", i>>16&255, i>>8&255, i&255)
	}
	// Load the script first so its cache entry is not counted.
	l := algo.Limit{Kind: algo.TokenBucket, Count: 100, Period: 3_600_000, Burst: 100}
	decide1(b, st, "rl:v2:{ip:warmup}:api", l, 1, "", 0)
	if err := c.Do(ctx, c.B().Del().Key("rl:v2:{ip:warmup}:api").Build()).Error(); err != nil {
		b.Fatal(err)
	}
	before := usedMemory()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			checks := []store.Check{{Limit: l, Cost: 1}}
			out := make([]algo.Decision, 1)
			for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
				checks[0].Key = key(int(i))
				if _, err := st.Decide(ctx, checks, 0, out); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	after := usedMemory()
	if got, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64(); err != nil || got != n {
		b.Fatalf("DBSIZE %d (%v), want %d", got, err, n)
	}
	one, err := c.Do(ctx, c.B().MemoryUsage().Key(key(n/2)).Samples(0).Build()).AsInt64()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
	}
	b.ReportMetric(float64(after-before)/n, "used-bytes/client")
	b.ReportMetric(float64(one), "key-bytes/client")
	b.ReportMetric(0, "ns/op")
}
