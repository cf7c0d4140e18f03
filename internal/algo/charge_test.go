package algo

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// randomLimits returns n valid limits of kind with small and large counts
// (requests; up to 20 for a sliding log), periods from 1 ms to 1 h and
// bursts up to 20, so windows and buckets both fill and drain within a few
// thousand steps.
func randomLimits(rng *rand.Rand, kind Kind, n int) []Limit {
	periods := []int64{1, 7, 1000, 60_000, 3_600_000}
	var out []Limit
	for len(out) < n {
		l := Limit{Kind: kind, Count: 1 + rng.Int64N(20), Period: periods[rng.IntN(len(periods))]}
		if rng.IntN(4) == 0 && kind != SlidingLog { // a log keeps one entry per request
			l.Count = 1 + rng.Int64N(1_000_000)
		}
		switch kind {
		case TokenBucket:
			l.Burst = 1 + rng.Int64N(20)
		case LeakyBucket:
			l.Burst = rng.Int64N(20)
			switch rng.IntN(3) {
			case 0:
				l.NoDelay = true
			case 1:
				l.Delay = rng.Int64N(l.Burst + 3)
			}
		}
		if l.Validate() == nil {
			out = append(out, l)
		}
	}
	return out
}

// chargeWalk runs random traffic on one state per kind: times mostly
// ascending (sometimes a step back), costs 0..Quota()+1, leases a..e or
// none, releases and refunds, and a reload to another limit of the same
// kind now and then (the state then meets a limit it was not built for).
// It calls check after every decision with the state as Decide left it.
func chargeWalk(t *testing.T, seed uint64, check func(l *Limit, s *State, now, cost int64, lease string, d Decision)) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	leases := []string{"", "a", "b", "c", "d", "e"}
	for _, kind := range []Kind{FixedWindow, SlidingLog, SlidingWindow, TokenBucket, LeakyBucket, Concurrency} {
		limits := randomLimits(rng, kind, 8)
		for _, first := range limits {
			l := first
			var s State
			now := B + rng.Int64N(l.Period)
			for range 3000 {
				switch r := rng.IntN(20); {
				case r == 0:
					l = limits[rng.IntN(len(limits))]
				case r == 1:
					now -= rng.Int64N(l.Period + 1)
				case r == 2:
					l.RefundLease(&s, now, 1+rng.Int64N(3), leases[rng.IntN(len(leases))])
				case r == 3:
					s.Release(leases[rng.IntN(len(leases))], now)
				default:
					// Steps of up to a few ms, or up to two periods.
					if rng.IntN(2) == 0 {
						now += rng.Int64N(4)
					} else {
						now += rng.Int64N(2*l.Period + 1)
					}
				}
				cost := rng.Int64N(l.Quota() + 2)
				lease := leases[rng.IntN(len(leases))]
				d := l.DecideLease(&s, now, cost, lease)
				check(&l, &s, now, cost, lease, d)
			}
		}
	}
}

// IdleAfterCharge, read off an accepted charge's Decision, is exactly
// IdleMillis of the state that charge wrote, for every kind and any state
// a limit of that kind can meet (reloads, refunds, releases, time stepping
// back). Concurrency without a lease is included: Decide only peeks then,
// and the memory store still saves the (unchanged) state.
func TestIdleAfterCharge(t *testing.T) {
	charged := map[Kind]int{}
	chargeWalk(t, 11, func(l *Limit, s *State, now, cost int64, lease string, d Decision) {
		if !d.Allowed || cost <= 0 {
			return
		}
		charged[l.Kind]++
		if got, want := l.IdleAfterCharge(&d), l.IdleMillis(s, now); got != want {
			t.Fatalf("%v at %d, cost %d, lease %q: IdleAfterCharge %d ms, IdleMillis %d ms (decision %+v, state %+v)",
				l, now, cost, lease, got, want, d, *s)
		}
	})
	// The walk must exercise every kind, or the test proves nothing.
	for _, kind := range []Kind{FixedWindow, SlidingLog, SlidingWindow, TokenBucket, LeakyBucket, Concurrency} {
		if charged[kind] < 1000 {
			t.Errorf("%v: only %d accepted charges checked, want ≥ 1000", kind, charged[kind])
		}
	}
}

// The sliding window counter's idle time is a window past ResetAfter: the
// charged count weighs as prev through the next window.
func TestIdleAfterChargeSlidingWindow(t *testing.T) {
	l := Limit{Kind: SlidingWindow, Count: 10, Period: 1000}
	var s State
	d := l.Decide(&s, B+250, 1)
	if !d.Allowed || d.ResetAfter != 750 {
		t.Fatalf("decision %+v, want accepted with ResetAfter 750", d)
	}
	if got := l.IdleAfterCharge(&d); got != 1750 {
		t.Fatalf("IdleAfterCharge %d ms, want 1750", got)
	}
}

// DecideInto writes the whole decision DecideLease returns, whatever *d held
// before, and changes the state as DecideLease does.
func TestDecideInto(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, kind := range []Kind{FixedWindow, SlidingLog, SlidingWindow, TokenBucket, LeakyBucket, Concurrency} {
		for _, l := range randomLimits(rng, kind, 4) {
			var a, b State
			now := B
			for i := range 2000 {
				now += rng.Int64N(2*l.Period/3 + 2)
				cost := rng.Int64N(l.Quota() + 2)
				lease := fmt.Sprint(rng.IntN(4))
				want := l.DecideLease(&a, now, cost, lease)
				got := Decision{Allowed: true, Remaining: -1, RetryAfter: -2, Wait: -3, ResetAfter: -4}
				l.DecideInto(&got, &b, now, cost, lease)
				if got != want {
					t.Fatalf("%v, step %d at %d, cost %d: DecideInto %+v, DecideLease %+v", &l, i, now, cost, got, want)
				}
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("%v, step %d at %d, cost %d: DecideInto left %+v, DecideLease %+v", &l, i, now, cost, b, a)
				}
			}
		}
	}
}
