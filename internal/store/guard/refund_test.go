package guard

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/store/memory"
)

// Refund for the package's test stores (declared here, next to the tests
// of the refund path). refStore undoes its own arithmetic; the others
// count nothing.
func (s *refStore) Refund(_ context.Context, checks []store.Check, now int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range checks {
		st := s.state[ch.Key]
		if st == nil || ch.Cost <= 0 {
			continue
		}
		switch lim := ch.Limit; lim.Kind {
		case algo.FixedWindow:
			if st.w == now/lim.Period {
				st.n = max(st.n-ch.Cost, 0)
			}
		case algo.TokenBucket:
			if st.seen {
				st.t = min(st.t+ch.Cost*lim.Period, lim.Burst*lim.Period)
			}
		case algo.Concurrency:
			delete(st.leases, ch.Lease)
		}
	}
	return nil
}

func (s *scriptStore) Refund(context.Context, []store.Check, int64) error { return nil }
func (s *flakyStore) Refund(context.Context, []store.Check, int64) error  { return nil }

// refundSpy is a store whose decisions fail and whose refunds are counted.
type refundSpy struct {
	refunds atomic.Int64
}

var errSpyDown = errors.New("spy store down")

func (s *refundSpy) Decide(context.Context, []store.Check, int64, []algo.Decision) (int64, error) {
	return 0, errSpyDown
}
func (s *refundSpy) Release(context.Context, []store.Check) error { return nil }
func (s *refundSpy) Refund(context.Context, []store.Check, int64) error {
	s.refunds.Add(1)
	return nil
}
func (s *refundSpy) Close() error { return nil }

// TestBreakerRefundPassesThrough: a refund reaches the store even while
// the circuit is open, and moves neither the circuit nor its counters.
func TestBreakerRefundPassesThrough(t *testing.T) {
	spy := &refundSpy{}
	b := newBreaker(spy, BreakerOptions{Failures: 2})
	out := make([]algo.Decision, 1)
	ck := []store.Check{{Key: "{a}:tb", Limit: tb2, Cost: 1}}
	for range 2 {
		b.Decide(context.Background(), ck, t0, out)
	}
	if b.Up() {
		t.Fatal("circuit closed after 2 failures of 2")
	}
	if err := b.Refund(context.Background(), ck, t0); err != nil {
		t.Fatalf("Refund: %v", err)
	}
	if n := spy.refunds.Load(); n != 1 {
		t.Fatalf("refunds reaching the store: %d, want 1 (circuit open)", n)
	}
	if _, err := b.Decide(context.Background(), ck, t0, out); !errors.Is(err, ErrOpen) {
		t.Fatalf("Decide after a refund: %v, want ErrOpen (refunds never close the circuit)", err)
	}
}

// TestOverLimitRefund: the cache never answers a refund; it forwards it to
// the store (the memory store here) and forgets the refunded keys, so the
// request refused locally before the refund is accepted right after it.
func TestOverLimitRefund(t *testing.T) {
	now := t0
	mem := memory.New(memory.Options{MaxKeys: 100, SweepInterval: -1, Clock: func() int64 { return now }})
	defer mem.Close()
	cs := counting(mem)
	c := NewOverLimitCache(cs, OverLimitOptions{Now: func() int64 { return now }})
	ck := []store.Check{{Key: "{a}:tb", Limit: tb2, Cost: 1}}
	out := make([]algo.Decision, 1)
	decide := func() algo.Decision {
		t.Helper()
		if _, err := c.Decide(context.Background(), ck, 0, out); err != nil {
			t.Fatalf("Decide: %v", err)
		}
		return out[0]
	}
	decide()
	decide()
	if d := decide(); d != deny(0, 1000, 2000) {
		t.Fatalf("third request of a bucket of 2: %+v, want refused for 1000 ms", d)
	}
	now += 100
	if d := decide(); d.Allowed || c.LocalRefusals() != 1 || cs.callCount() != 3 {
		t.Fatalf("fourth request: %+v, local %d, store calls %d; want a local refusal", d, c.LocalRefusals(), cs.callCount())
	}
	// The request accepted at t0 is refused afterwards by the proxy (a
	// shaping cap): its token goes back.
	if err := c.Refund(context.Background(), ck, t0); err != nil {
		t.Fatalf("Refund: %v", err)
	}
	if c.Len() != 0 {
		t.Fatalf("cache holds %d entries after the refund, want 0", c.Len())
	}
	// At t0+100: 1 token refunded + 100 ms of refill (0.1 token) → accepted, 0 left.
	if d := decide(); d != allow(0, 1900) || cs.callCount() != 4 {
		t.Fatalf("after the refund: %+v (store calls %d), want accepted by the store", d, cs.callCount())
	}
}
