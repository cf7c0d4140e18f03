package compare

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// Counter is the naive application-side limiter of docs/PRODUCT.md's race: read
// the count, compare it with the limit, then increment — three steps that
// other requests interleave with.
type Counter interface {
	Get(ctx context.Context, key string) (int64, error)
	Incr(ctx context.Context, key string) error
}

// RaceLimit is the race's limit: 10 requests per hour, so nothing refills
// while the requests are in flight.
var RaceLimit = algo.Limit{Kind: algo.FixedWindow, Count: 10, Period: 3_600_000}

// RaceNaive sends n simultaneous requests through GET-compare-INCR on c and
// returns how many were let through.
func RaceNaive(ctx context.Context, c Counter, prefix string, n int) (int, error) {
	key := prefix + store.KeyVersion + "{race-" + runID() + "}:naive"
	var allowed atomic.Int64
	err := simultaneously(n, func() error {
		v, err := c.Get(ctx, key)
		if err != nil {
			return err
		}
		runtime.Gosched() // as a network round trip would: others read the same count
		if v < RaceLimit.Count {
			allowed.Add(1)
			return c.Incr(ctx, key)
		}
		return nil
	})
	return int(allowed.Load()), err
}

// RaceAtomic sends n simultaneous requests through st (one atomic decision
// each: a Lua script on Valkey) and returns how many were accepted.
func RaceAtomic(ctx context.Context, st store.Store, lim algo.Limit, prefix string, n int) (int, error) {
	key := prefix + store.KeyVersion + "{race-" + runID() + "}:atomic"
	var allowed atomic.Int64
	err := simultaneously(n, func() error {
		var out [1]algo.Decision
		ck := [1]store.Check{{Key: key, Limit: lim, Cost: 1, Lease: leaseFor(lim, key)}}
		if _, err := st.Decide(ctx, ck[:], 0, out[:]); err != nil {
			return err
		}
		if out[0].Allowed {
			allowed.Add(1)
		}
		return nil
	})
	return int(allowed.Load()), err
}

var leaseSeq atomic.Int64

// leaseFor gives concurrency checks a unique lease id (the race holds
// every lease: none is released).
func leaseFor(lim algo.Limit, key string) string {
	if lim.Kind != algo.Concurrency {
		return ""
	}
	return fmt.Sprintf("%s#%d", key, leaseSeq.Add(1))
}

// simultaneously runs f in n goroutines released at one instant.
func simultaneously(n int, f func() error) error {
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := f(); err != nil {
				errs <- err
			}
		}()
	}
	time.Sleep(10 * time.Millisecond) // let every goroutine reach the gate
	close(start)
	wg.Wait()
	close(errs)
	return <-errs
}

// MapCounter is Counter over an in-process map: each step is locked on its
// own, the sequence is not — the memory-store analogue of GET then INCR.
type MapCounter struct {
	mu sync.Mutex
	m  map[string]int64
}

// Get returns the count of key.
func (c *MapCounter) Get(_ context.Context, key string) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key], nil
}

// Incr adds one to the count of key.
func (c *MapCounter) Incr(_ context.Context, key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int64{}
	}
	c.m[key]++
	return nil
}
