package valkey

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/store/memory"
)

// charge is one accepted decision that may later be refunded.
type charge struct {
	checks []store.Check
	now    int64
}

// TestDifferentialRefund: seeded random traffic per algorithm in which
// accepted requests are refunded later — right away, or after other
// clients' and the same client's requests charged the key — gives
// identical decisions (every field, to the ms) from the Lua refund
// (Store.Refund, refund_<name> in lua/<name>.lua), package algo's
// RefundLease (the model) and the memory store's Refund. Refunded keys are then decided again, so
// any difference in the refunded state shows.
func TestDifferentialRefund(t *testing.T) {
	st, _ := newStore(t)
	const clients, perKind = 3, 4000
	for _, kind := range diffKinds {
		limits := diffLimits[kind]
		t.Run(kind.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(kind), 7))
			mem := memory.New(memory.Options{MaxKeys: 1000, SweepInterval: -1})
			defer mem.Close()
			m := model{}
			var pending []charge
			now := base + rng.Int64N(100_000)
			steps, refunds, refused := 0, 0, 0
			decide := func(checks []store.Check) {
				t.Helper()
				steps++
				got := make([]algo.Decision, len(checks))
				gotMem := make([]algo.Decision, len(checks))
				want := make([]algo.Decision, len(checks))
				if _, err := st.Decide(context.Background(), checks, now, got); err != nil {
					t.Fatalf("step %d: Decide: %v", steps, err)
				}
				if _, err := mem.Decide(context.Background(), checks, now, gotMem); err != nil {
					t.Fatalf("step %d: memory Decide: %v", steps, err)
				}
				m.decide(checks, now, want)
				all := true
				for i, c := range checks {
					if got[i] != want[i] || gotMem[i] != want[i] {
						t.Fatalf("step %d (%d refunds so far), %s key %s cost %d lease %q at B%+d:\nvalkey %+v\nmemory %+v\nalgo   %+v",
							steps, refunds, c.Limit.String(), c.Key, c.Cost, c.Lease, now-base, got[i], gotMem[i], want[i])
					}
					all = all && got[i].Allowed
				}
				if !all {
					refused++
					return
				}
				if checks[0].Cost > 0 {
					pending = append(pending, charge{checks, now})
				}
			}
			refund := func(k int) {
				t.Helper()
				c := pending[k]
				pending = append(pending[:k], pending[k+1:]...)
				refunds++
				if err := st.Refund(context.Background(), c.checks, c.now); err != nil {
					t.Fatalf("Refund: %v", err)
				}
				if err := mem.Refund(context.Background(), c.checks, c.now); err != nil {
					t.Fatalf("memory Refund: %v", err)
				}
				for _, ck := range c.checks {
					if s := m[ck.Key]; s != nil {
						ck.Limit.RefundLease(s, c.now, ck.Cost, ck.Lease)
					}
				}
				// A peek of the refunded keys right away.
				peek := make([]store.Check, len(c.checks))
				for i, ck := range c.checks {
					peek[i] = store.Check{Key: ck.Key, Limit: ck.Limit}
				}
				decide(peek)
			}
			for steps < perKind {
				l := limits[rng.IntN(len(limits))]
				client := rng.IntN(clients)
				key := fmt.Sprintf("rl:v2:{r%d}:%d:%d", client, kind, l.Count*1_000_000+l.Period)
				now += randomGap(rng, l) / clients
				c := store.Check{Key: key, Limit: l, Cost: randomCost(rng, l)}
				if kind == algo.Concurrency {
					// Unique leases: refunding a refreshed lease would also
					// end the earlier request's hold (the same in Lua and Go).
					c.Lease = fmt.Sprint("req-", steps)
				}
				decide([]store.Check{c})
				switch x := rng.IntN(10); {
				case x < 2 && len(pending) > 0: // the newest charge, right away
					refund(len(pending) - 1)
				case x < 4 && len(pending) > 0: // a recent one, charged over since
					refund(max(len(pending)-1-rng.IntN(8), 0))
				}
				if len(pending) > 64 {
					pending = pending[len(pending)-64:]
				}
			}
			if refunds < perKind/5 || refused == 0 {
				t.Fatalf("%d steps exercised %d refunds and %d refusals", steps, refunds, refused)
			}
			t.Logf("%d decisions, %d refunds, %d refused: identical", steps, refunds, refused)
		})
	}
}

// TestRefundSteps: the refund of hand-computed cases, through the public
// Store.Refund, including a decision of several checks refunded as one.
func TestRefundSteps(t *testing.T) {
	st, _ := newStore(t)
	leaky := algo.Limit{Kind: algo.LeakyBucket, Count: 10, Period: 1000, Burst: 20}
	fixed := algo.Limit{Kind: algo.FixedWindow, Count: 10, Period: 10_000}
	lk := "rl:v2:{steps}:lb"
	fk := "rl:v2:{steps}:fw"
	// Ten requests at one instant on both policies, then six refunded: the
	// bucket keeps 4 requests' water (excess 3000 units), the window 4.
	both := []store.Check{{Key: lk, Limit: leaky, Cost: 1}, {Key: fk, Limit: fixed, Cost: 1}}
	out := make([]algo.Decision, 2)
	for i := range 10 {
		if _, err := st.Decide(context.Background(), both, base, out); err != nil || !out[0].Allowed || !out[1].Allowed {
			t.Fatalf("request %d: %+v %v", i, out, err)
		}
	}
	if out[0].Wait != 900 {
		t.Fatalf("tenth request waits %d ms, want 900", out[0].Wait)
	}
	for range 6 {
		if err := st.Refund(context.Background(), both, base); err != nil {
			t.Fatal(err)
		}
	}
	// 50 ms later the bucket has drained 500 units: the next request waits
	// (3000 − 500 + 1000)/10 = 350 ms, not (9000 − 500 + 1000)/10 = 950.
	if _, err := st.Decide(context.Background(), both, base+50, out); err != nil {
		t.Fatal(err)
	}
	if want := D(true, 16, 0, 350, 450); out[0] != want {
		t.Errorf("leaky bucket after the refunds: %+v, want %+v", out[0], want)
	}
	if want := D(true, 5, 0, 0, 9_950); out[1] != want {
		t.Errorf("fixed window after the refunds: %+v, want %+v", out[1], want)
	}
	// A refund at a different now than the charge's, on a fixed window
	// whose window has ended, changes nothing.
	if err := st.Refund(context.Background(), both[1:], base-10_000); err != nil {
		t.Fatal(err)
	}
	if d := decide1(t, st, fk, fixed, 0, "", base+60); d != D(true, 5, 0, 0, 9_940) {
		t.Errorf("fixed window after a refund of an ended window: %+v", d)
	}
	// Cost-0 checks are not refunded; an empty refund is no call.
	if err := st.Refund(context.Background(), []store.Check{{Key: fk, Limit: fixed}}, base); err != nil {
		t.Fatal(err)
	}
	if err := st.Refund(context.Background(), nil, base); err != nil {
		t.Fatal(err)
	}
	if d := decide1(t, st, fk, fixed, 0, "", base+60); d.Remaining != 5 {
		t.Errorf("a cost-0 refund changed the window: %+v", d)
	}
}
