package valkey

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/store/memory"
	"rlproxy/internal/testutil/redisserver"
)

// chargeTrio applies every operation to the Valkey store (the Lua scripts),
// the memory store and the model (package algo), and compares decisions.
type chargeTrio struct {
	t     *testing.T
	st    *Store
	srv   *redisserver.Server
	mem   *memory.Store
	m     model
	steps int
}

func (c *chargeTrio) decide(checks []store.Check, now int64) bool {
	c.t.Helper()
	c.steps++
	got, gotMem, want := make([]algo.Decision, len(checks)), make([]algo.Decision, len(checks)), make([]algo.Decision, len(checks))
	if _, err := c.st.Decide(context.Background(), checks, now, got); err != nil {
		c.t.Fatalf("step %d: Decide: %v", c.steps, err)
	}
	if _, err := c.mem.Decide(context.Background(), checks, now, gotMem); err != nil {
		c.t.Fatalf("step %d: memory Decide: %v", c.steps, err)
	}
	c.m.decide(checks, now, want)
	all := true
	for i, ck := range checks {
		if got[i] != want[i] || gotMem[i] != want[i] {
			c.t.Fatalf("step %d: %s key %s cost %d at B%+d:\nvalkey %+v\nmemory %+v\nalgo   %+v",
				c.steps, ck.Limit.String(), ck.Key, ck.Cost, now-base, got[i], gotMem[i], want[i])
		}
		all = all && got[i].Allowed
	}
	return all
}

// charge force-charges checks on all three, and checks that each charged
// key's Valkey expiry is algo's IdleMillis of the model's new state (less
// the real ms since the script was sent).
func (c *chargeTrio) charge(checks []store.Check, now int64) {
	c.t.Helper()
	c.steps++
	sent := time.Now()
	if err := c.st.Charge(context.Background(), checks, now); err != nil {
		c.t.Fatalf("step %d: Charge: %v", c.steps, err)
	}
	if err := c.mem.Charge(context.Background(), checks, now); err != nil {
		c.t.Fatalf("step %d: memory Charge: %v", c.steps, err)
	}
	for _, ck := range checks {
		if c.m[ck.Key] == nil {
			c.m[ck.Key] = &algo.State{}
		}
		ck.Limit.ForceCharge(c.m[ck.Key], now, ck.Cost)
		if c.srv == nil || ck.Cost <= 0 || ck.Limit.Kind == algo.Concurrency {
			continue
		}
		idle := ck.Limit.IdleMillis(c.m[ck.Key], now)
		pttl, err := c.srv.Do(c.t, "PTTL", ck.Key).AsInt64()
		slack := time.Since(sent).Milliseconds() + 1
		if err != nil || pttl > max(idle, 1) || pttl < idle-slack {
			c.t.Fatalf("step %d: charge of %s key %s at B%+d: PTTL %d, %v; want IdleMillis %d",
				c.steps, ck.Limit.String(), ck.Key, now-base, pttl, err, idle)
		}
	}
}

func (c *chargeTrio) refund(checks []store.Check, now int64) {
	c.t.Helper()
	if err := c.st.Refund(context.Background(), checks, now); err != nil {
		c.t.Fatalf("Refund: %v", err)
	}
	if err := c.mem.Refund(context.Background(), checks, now); err != nil {
		c.t.Fatalf("memory Refund: %v", err)
	}
	for _, ck := range checks {
		if s := c.m[ck.Key]; s != nil {
			ck.Limit.RefundLease(s, now, ck.Cost, ck.Lease)
		}
	}
}

func newChargeTrio(t *testing.T, st *Store, srv *redisserver.Server) *chargeTrio {
	mem := memory.New(memory.Options{MaxKeys: 10_000, SweepInterval: -1})
	t.Cleanup(func() { mem.Close() })
	return &chargeTrio{t: t, st: st, srv: srv, mem: mem, m: model{}}
}

// TestDifferentialCharge: seeded random traffic per algorithm in which
// accepted requests are followed by an unconditional charge of a random
// response cost (often beyond the quota: the caps and a bucket's debt),
// and some by a refund (a response cheaper than the up-front cost), gives
// identical decisions, to the ms, from the Lua charge script
// (Store.Charge), the memory store and package algo's ForceCharge; and
// every charged key's expiry is algo's IdleMillis. (A reload's changed
// burst is TestChargeSteps'.)
func TestDifferentialCharge(t *testing.T) {
	st, srv := newStore(t)
	const clients, perKind = 3, 3000
	for _, kind := range diffKinds {
		limits := diffLimits[kind]
		t.Run(kind.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(kind), 11))
			c := newChargeTrio(t, st, srv)
			now := base + rng.Int64N(100_000)
			charges := 0
			for c.steps < perKind {
				l := limits[rng.IntN(len(limits))]
				key := fmt.Sprintf("rl:v2:{ch%d}:%d:%d", rng.IntN(clients), kind, l.Count*1_000_000+l.Period)
				now += randomGap(rng, l) / clients
				ck := store.Check{Key: key, Limit: l, Cost: 1}
				if kind == algo.Concurrency {
					ck.Lease = fmt.Sprint("req-", c.steps)
				}
				if !c.decide([]store.Check{ck}, now) {
					continue
				}
				switch x := rng.IntN(10); {
				case x < 6: // the response cost more
					extra := ck
					extra.Cost = 1 + rng.Int64N(3*l.Quota())
					now += rng.Int64N(50) // the response comes later (time never goes back)
					c.charge([]store.Check{extra}, now)
					charges++
				case x < 8: // it cost nothing: the up-front unit back
					c.refund([]store.Check{ck}, now)
				}
			}
			t.Logf("%d steps, %d unconditional charges: identical", c.steps, charges)
		})
	}
}

// TestChargeSteps is the response-cost case on the stores: a token
// bucket of 100 at 1 r/s, each request decided at cost 1 and charged its
// response's 40 tokens (39 more). Requests 1–3 pass, the 4th is refused
// with a retry of 21 s, until a request of cost 1 would be accepted.
// Valkey and memory agree to the ms.
func TestChargeSteps(t *testing.T) {
	st, srv := newStore(t)
	c := newChargeTrio(t, st, srv)
	l := algo.Limit{Kind: algo.TokenBucket, Count: 1, Period: 1000, Burst: 100}
	ck := store.Check{Key: "rl:v2:{steps}:tokens:tb", Limit: l, Cost: 1}
	for i := range 3 {
		if !c.decide([]store.Check{ck}, base) {
			t.Fatalf("request %d refused", i+1)
		}
		extra := ck
		extra.Cost = 39
		c.charge([]store.Check{extra}, base)
	}
	out := make([]algo.Decision, 1)
	if _, err := st.Decide(context.Background(), []store.Check{ck}, base, out); err != nil || out[0].Allowed || out[0].RetryAfter != 21_000 {
		t.Fatalf("4th: %+v %v, want refused with RetryAfter 21000 ms", out[0], err)
	}
	// A reload that lowers the burst to 10 neither forgives the debt nor
	// adds to it: still 21 s.
	low := ck
	low.Limit.Burst = 10
	if _, err := st.Decide(context.Background(), []store.Check{low}, base, out); err != nil || out[0].Allowed || out[0].RetryAfter != 21_000 {
		t.Fatalf("4th, burst lowered to 10: %+v %v, want refused with RetryAfter 21000 ms", out[0], err)
	}
	if c.decide([]store.Check{low}, base+20_999) {
		t.Fatal("1 ms before the debt is repaid, lowered burst: accepted")
	}
	if c.decide([]store.Check{ck}, base+20_999) {
		t.Fatal("1 ms before the debt is repaid: accepted")
	}
	if !c.decide([]store.Check{ck}, base+21_000) {
		t.Fatal("once the debt is repaid: refused")
	}
}
