package valkey

import (
	"context"
	"testing"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/testutil/redisserver"
	"rlproxy/internal/testutil/waitfor"
)

// base is docs/PRODUCT.md's round base time B (Unix ms).
const base = algo.ReferenceBase

// newStore starts a redis-server and a Store on it with key prefix "rl:".
func newStore(t testing.TB) (*Store, *redisserver.Server) {
	t.Helper()
	srv := redisserver.Start(t)
	return openStore(t, []string{srv.Addr}), srv
}

// openStore returns a Store on addrs (one server or Cluster seeds) with key
// prefix "rl:" and a 5 s Options.Timeout, closed when t ends.
func openStore(t testing.TB, addrs []string) *Store {
	t.Helper()
	st, err := New(context.Background(), Options{Addrs: addrs, KeyPrefix: "rl:", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newSleepyStore starts a redis-server that accepts DEBUG SLEEP and a
// connected Store on it with a 200 ms Options.Timeout.
func newSleepyStore(t testing.TB) (*Store, *redisserver.Server) {
	t.Helper()
	srv := redisserver.Start(t, "--enable-debug-command", "yes")
	st, err := New(context.Background(), Options{Addrs: []string{srv.Addr}, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv.Client(t) // connect before the server sleeps
	return st, srv
}

// warmUp connects st (its first decision succeeds) before a test makes the
// server sleep: a connect that meets the sleep fails otherwise than the
// test means. Under load one attempt may exceed st's short timeout: it
// retries until one succeeds (waitfor.True).
func warmUp(t testing.TB, st *Store) {
	t.Helper()
	l := algo.Limit{Kind: algo.FixedWindow, Count: 1 << 30, Period: 3_600_000}
	waitfor.True(t, "the store connected", func() bool {
		_, err := st.Decide(context.Background(), []store.Check{{Key: "rl:v2:{warm}:fw", Limit: l, Cost: 1}}, base, make([]algo.Decision, 1))
		return err == nil
	})
}

// decide1 runs one check and fails the test on error.
func decide1(t testing.TB, st *Store, key string, l algo.Limit, cost int64, lease string, now int64) algo.Decision {
	t.Helper()
	out := make([]algo.Decision, 1)
	if _, err := st.Decide(context.Background(), []store.Check{{Key: key, Limit: l, Cost: cost, Lease: lease}}, now, out); err != nil {
		t.Fatalf("Decide(%s, now=%d): %v", key, now, err)
	}
	return out[0]
}
