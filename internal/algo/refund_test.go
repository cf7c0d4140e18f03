package algo

import (
	"math/rand/v2"
	"testing"
)

// refundStep is one operation of a refund scenario: a charge (or, with
// refund set, a refund of cost at ms) followed, when want is set, by a peek
// at peekAt that must give want.
type refundStep struct {
	at     int64
	cost   int64
	lease  string
	refund bool
}

// runRefund applies steps to one state, then peeks at B+peekAt.
func runRefund(t *testing.T, l Limit, steps []refundStep, peekAt int64, peekLease string, want Decision) {
	t.Helper()
	if err := l.Validate(); err != nil {
		t.Fatalf("%v: %v", &l, err)
	}
	var s State
	for i, st := range steps {
		if st.refund {
			l.RefundLease(&s, B+st.at, st.cost, st.lease)
			continue
		}
		if d := l.DecideLease(&s, B+st.at, st.cost, st.lease); !d.Allowed {
			t.Fatalf("%v, step %d: charge at %d refused: %+v", &l, i, st.at, d)
		}
	}
	if got := l.DecideLease(&s, B+peekAt, 0, peekLease); got != want {
		t.Fatalf("%v: peek at %d after %+v: got %+v, want %+v", &l, peekAt, steps, got, want)
	}
}

func charges(at, n int64) []refundStep {
	var out []refundStep
	for range n {
		out = append(out, refundStep{at: at, cost: 1})
	}
	return out
}

// The e2e shaping scenario: leaky bucket 10r/s burst 20 (delay mode), ten
// requests at one instant (excess 9000 units), six refunded: the bucket
// holds the four kept (excess 3000), so a request 50 ms later waits
// (3000 − 500 + 1000)/10 = 350 ms, not 950.
func TestRefundLeakyBucket(t *testing.T) {
	l := Limit{Kind: LeakyBucket, Count: 10, Period: 1000, Burst: 20}
	steps := append(charges(0, 10), refundStep{at: 0, cost: 6, refund: true})
	// Peek at 0: 17 remaining of 20, a request would wait 3000/10 ms,
	// empty in (3000+1000)/10 ms.
	runRefund(t, l, steps, 0, "", ok(17, 300, 400))
	var s State
	for range 10 {
		l.Decide(&s, B, 1)
	}
	for range 6 {
		l.Refund(&s, B, 1)
	}
	if d := l.Decide(&s, B+50, 1); d != ok(16, 350, 450) {
		t.Fatalf("request 50 ms after: %+v, want wait 350", d)
	}
	// Charged at 0, others charged at 100, refunded at 0's now: as if
	// only the others had come. Without a refund: 2 at 0 (E=1000), 100 ms
	// drain (E=0), 1 at 100 (E=1000); refunding one of the first leaves 0.
	steps = append(charges(0, 2), refundStep{at: 100, cost: 1}, refundStep{at: 0, cost: 1, refund: true})
	runRefund(t, l, steps, 100, "", ok(20, 0, 100))
	// The floor: refunding more than the bucket holds leaves it empty.
	steps = append(charges(0, 1), refundStep{at: 0, cost: 5, refund: true})
	runRefund(t, l, steps, 0, "", ok(21, 0, 0))
	// An idle state stays idle (nothing to refund).
	runRefund(t, l, []refundStep{{at: 0, cost: 3, refund: true}}, 0, "", ok(21, 0, 0))
}

func TestRefundTokenBucket(t *testing.T) {
	l := Limit{Kind: TokenBucket, Count: 10, Period: 1000, Burst: 5}
	// 5 taken at 0, one back at 100 and taken; 2 of the first refunded:
	// deficit 5000 − 2000 = 3000, 2 tokens left.
	steps := append(charges(0, 5), refundStep{at: 100, cost: 1}, refundStep{at: 0, cost: 2, refund: true})
	runRefund(t, l, steps, 100, "", ok(2, 0, 300))
	// Floor 0: a full bucket.
	steps = append(charges(0, 1), refundStep{at: 0, cost: 3, refund: true})
	runRefund(t, l, steps, 0, "", ok(5, 0, 0))
}

func TestRefundFixedWindow(t *testing.T) {
	l := Limit{Kind: FixedWindow, Count: 3, Period: 1000}
	steps := append(charges(100, 3), refundStep{at: 100, cost: 1, refund: true})
	runRefund(t, l, steps, 200, "", ok(1, 0, 800))
	// A charge of a window that has ended is not refunded from the next.
	steps = []refundStep{{at: 900, cost: 1}, {at: 1100, cost: 1}, {at: 900, cost: 1, refund: true}}
	runRefund(t, l, steps, 1200, "", ok(2, 0, 800))
	// Floor 0.
	steps = []refundStep{{at: 100, cost: 1}, {at: 100, cost: 3, refund: true}}
	runRefund(t, l, steps, 200, "", ok(3, 0, 800))
}

func TestRefundSlidingWindow(t *testing.T) {
	l := Limit{Kind: SlidingWindow, Count: 10, Period: 1000}
	// 4 at 900 (window 0), 1 at 1100 (window 1: prev 4); refunding 2 of
	// the first lowers prev to 2. At 1500: 2·500/1000 + 1 → 8 remaining.
	steps := append(charges(900, 4), refundStep{at: 1100, cost: 1}, refundStep{at: 900, cost: 2, refund: true})
	runRefund(t, l, steps, 1500, "", ok(8, 0, 500))
	// Same window: curr -= 2.
	steps = append(charges(100, 4), refundStep{at: 100, cost: 2, refund: true})
	runRefund(t, l, steps, 200, "", ok(8, 0, 800))
	// Two windows on, nothing left to refund.
	steps = []refundStep{{at: 100, cost: 3}, {at: 2100, cost: 1}, {at: 100, cost: 3, refund: true}}
	runRefund(t, l, steps, 2200, "", ok(9, 0, 800))
}

func TestRefundSlidingLog(t *testing.T) {
	l := Limit{Kind: SlidingLog, Count: 5, Period: 1000}
	steps := []refundStep{{at: 100, cost: 2}, {at: 200, cost: 1}, {at: 100, cost: 1, refund: true}}
	runRefund(t, l, steps, 300, "", ok(3, 0, 900))
	// No entry at that ms: nothing changes; more than there are: all of
	// that ms go, the others stay.
	steps = append(steps, refundStep{at: 150, cost: 1, refund: true}, refundStep{at: 100, cost: 5, refund: true})
	runRefund(t, l, steps, 300, "", ok(4, 0, 900))
}

func TestRefundConcurrency(t *testing.T) {
	l := Limit{Kind: Concurrency, Count: 2, Period: 10_000}
	steps := []refundStep{{at: 0, cost: 1, lease: "a"}, {at: 10, cost: 1, lease: "b"}, {at: 0, cost: 1, lease: "a", refund: true}}
	runRefund(t, l, steps, 20, "", Decision{Allowed: true, Remaining: 1, ResetAfter: 9990})
	// Refund without a lease (Refund) drops nothing.
	var s State
	l.DecideLease(&s, B, 1, "a")
	l.Refund(&s, B, 1)
	if len(s.Leases) != 1 {
		t.Fatalf("Refund without a lease dropped %v", s.Leases)
	}
}

// TestRefundRightAwayIsInverse: on random traffic over every algorithm, a
// request charged and refunded at once leaves a state that decides every
// later request exactly as the state that never saw it.
func TestRefundRightAwayIsInverse(t *testing.T) {
	limits := append(ReferenceLimits(),
		Limit{Kind: SlidingLog, Count: 4, Period: 1000},
		Limit{Kind: TokenBucket, Count: 3, Period: 1000, Burst: 5},
		Limit{Kind: LeakyBucket, Count: 3, Period: 1000, Burst: 5, Delay: 2},
		Limit{Kind: Concurrency, Count: 3, Period: 1000})
	rng := rand.New(rand.NewPCG(1, 2))
	for _, l := range limits {
		var with, without State
		now := B + rng.Int64N(10_000)
		refunds := 0
		for i := range 3000 {
			now += rng.Int64N(max(2*l.Period/l.Count, 2))
			cost := 1 + rng.Int64N(2)
			lease := string(rune('a' + rng.IntN(8)))
			if rng.IntN(3) == 0 {
				// A fresh lease: refunding a refreshed one would drop a
				// lease the earlier request still holds.
				fresh := "x" + lease + string(rune('0'+i%10))
				if l.DecideLease(&with, now, cost, fresh).Allowed {
					l.RefundLease(&with, now, cost, fresh)
					refunds++
				}
				continue
			}
			a, b := l.DecideLease(&with, now, cost, lease), l.DecideLease(&without, now, cost, lease)
			if a != b {
				t.Fatalf("%v, step %d at +%d: after refunds %+v, never charged %+v", &l, i, now-B, a, b)
			}
		}
		if refunds < 100 {
			t.Fatalf("%v: only %d refunds exercised", &l, refunds)
		}
	}
}
