package allotment

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/store/valkey"
	"rlproxy/internal/testutil/redisserver"
)

// base is a round Unix ms (algo.ReferenceBase), the start of every
// window the tests use.
const base = algo.ReferenceBase

// clock is a test's local time, shared by its instances.
type clock struct{ ms atomic.Int64 }

func (c *clock) now() int64 { return c.ms.Load() }

// instance is one rlproxy instance: a Valkey store and its layer.
type instance struct {
	vs *valkey.Store
	l  *Layer
}

// fleet starts n instances on srv. sync runs every fetch and return at
// once (deterministic with an injected clock); otherwise in goroutines.
func fleet(t testing.TB, srv *redisserver.Server, n int, c *clock, sync bool) []instance {
	t.Helper()
	var out []instance
	for range n {
		vs, err := valkey.New(context.Background(), valkey.Options{Addrs: []string{srv.Addr}, KeyPrefix: "rl:", Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		opt := Options{}
		if c != nil {
			opt.Now = c.now
		}
		if sync {
			opt.Go = func(f func()) { f() }
		}
		l := New(vs, vs, opt)
		t.Cleanup(func() { l.Close() })
		out = append(out, instance{vs, l})
	}
	return out
}

// decide decides one request of cost 1 for key under lim on in at now
// and fails the test on error.
func decide(t testing.TB, in instance, key string, lim algo.Limit, set *store.Allotment, now int64) algo.Decision {
	t.Helper()
	var out [1]algo.Decision
	ck := [1]store.Check{{Key: key, Limit: lim, Cost: 1, Allot: set}}
	if _, err := in.l.Decide(context.Background(), ck[:], now, out[:]); err != nil {
		t.Fatalf("Decide(%s): %v", key, err)
	}
	return out[0]
}

// outstanding is the units held in slices by the instances but skip.
func outstanding(fl []instance, skip int) int64 {
	var n int64
	for i, in := range fl {
		if i == skip {
			continue
		}
		in.l.EachAllotment(func(_ string, o int64, _ uint64) { n += o })
	}
	return n
}

// fetches is the slices the instances asked for.
func fetches(fl []instance) uint64 {
	var n uint64
	for _, in := range fl {
		in.l.EachAllotment(func(_ string, _ int64, f uint64) { n += f })
	}
	return n
}
