package allotment

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/store/valkey"
	"rlproxy/internal/testutil/faultrelay"
	"rlproxy/internal/testutil/redisserver"
)

// TestFarFromStore: an instance 80 ms each way from Valkey (the fault
// relay). rampUp after a busy token-bucket key got its first slice
// (the ramp-up: the first slice is sized to the rate the key had while
// every request waited on the store, each next one to the rate the last
// was spent at), none of its decisions waits on the store (each fetch is
// ahead of need), and their p99 stays below 2.5 ms.
func TestFarFromStore(t *testing.T) {
	const rampUp = 3 * time.Second // measured 1.9 s on a loaded 2-core machine
	if testing.Short() {
		t.Skip("9 s of traffic")
	}
	srv := redisserver.Start(t)
	relay := faultrelay.Start(t, srv.Addr)
	vs, err := valkey.New(context.Background(), valkey.Options{Addrs: []string{relay.Addr()}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	next := &countingStore{Store: vs}
	l := New(next, vs, Options{})
	t.Cleanup(func() { l.Close() })
	relay.Delay(80 * time.Millisecond)
	lim := algo.Limit{Kind: algo.TokenBucket, Count: 10_000_000, Period: 1000, Burst: 10_000_000}
	ck := [1]store.Check{{Key: "rl:{far}:tb", Limit: lim, Cost: 1, Allot: &store.Allotment{Policy: "p", MaxFraction: 500, TTL: 10_000}}}
	var out [1]algo.Decision
	var lat []time.Duration
	warm, asked := false, int64(0) // asked: store decisions when warm
	var first time.Time            // the first slice's arrival
	stop := time.Now().Add(9 * time.Second)
	n := 0
	for time.Now().Before(stop) {
		n++
		start := time.Now()
		if _, err := l.Decide(context.Background(), ck[:], 0, out[:]); err != nil || !out[0].Allowed {
			t.Fatal(err, out[0])
		}
		d := time.Since(start)
		if warm {
			lat = append(lat, d)
		}
		var held int64
		var f uint64
		l.EachAllotment(func(_ string, o int64, n uint64) { held, f = held+o, f+n })
		if first.IsZero() && held > 0 {
			first = time.Now()
		}
		if !warm && !first.IsZero() && time.Since(first) > rampUp {
			warm, asked = true, next.n.Load()
		}
	}
	if len(lat) == 0 {
		var f uint64
		l.EachAllotment(func(_ string, _ int64, n uint64) { f += n })
		t.Fatalf("no slice arrived in 6 s (%d fetches, %d decisions)", f, n)
	}
	slices.Sort(lat)
	p99, worst := lat[len(lat)*99/100], lat[len(lat)-1]
	var f uint64
	l.EachAllotment(func(_ string, _ int64, n uint64) { f += n })
	t.Logf("%d decisions (%d in the store before) from %v after the first slice: p99 %v, worst %v; %d fetches", len(lat), asked, rampUp, p99, worst, f)
	if n := next.n.Load() - asked; n != 0 {
		t.Errorf("%d decisions waited on the store after the ramp-up", n)
	}
	if p99 > 2500*time.Microsecond {
		t.Errorf("p99 %v, want at most 2.5 ms", p99)
	}
}

// countingStore counts the decisions that reach the store.
type countingStore struct {
	store.Store
	n atomic.Int64
}

func (c *countingStore) Decide(ctx context.Context, checks []store.Check, now int64, out []algo.Decision) (int64, error) {
	c.n.Add(1)
	return c.Store.Decide(ctx, checks, now, out)
}
