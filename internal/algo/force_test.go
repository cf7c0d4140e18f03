package algo

import "testing"

// TestForceChargeTokenDebt: a token bucket of 100 at 1 r/s; each request
// is decided at cost 1 and its response's 40 tokens force-charge the other
// 39. Requests 1–3 pass, the third leaving a debt of 20; the 4th is
// refused until a cost-1 request fits again: 21 s. The debt is repaid at
// the rate, and neither a lowered nor a raised burst forgives it, while a
// lowered burst still empties a bucket without debt.
func TestForceChargeTokenDebt(t *testing.T) {
	l := Limit{Kind: TokenBucket, Count: 1, Period: 1000, Burst: 100}
	var s State
	const t0 = 1_700_000_000_000
	for i := range 3 {
		now := int64(t0 + i)
		if d := l.Decide(&s, now, 1); !d.Allowed {
			t.Fatalf("request %d refused: %+v", i+1, d)
		}
		l.ForceCharge(&s, now, 39)
	}
	d := l.Decide(&s, t0+3, 1)
	if d.Allowed || d.RetryAfter != 20_997 || d.Remaining != 0 {
		t.Fatalf("4th: %+v, want refused, retry 20997 ms (21 s less the 3 ms refilled), remaining 0", d)
	}
	if d := l.Decide(&s, t0+3+20_996, 1); d.Allowed {
		t.Fatalf("1 ms before the debt is repaid: %+v, want refused", d)
	}
	if d := l.Decide(&s, t0+3+20_997, 1); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("once repaid: %+v, want allowed with 0 left", d)
	}

	// A reload with a lowered burst keeps a debt…
	var debt State
	l.ForceCharge(&debt, t0, 100) // empty
	l.ForceCharge(&debt, t0, 100) // and 100 owed (the cap: one quota)
	low := Limit{Kind: TokenBucket, Count: 1, Period: 1000, Burst: 10}
	if d := low.Decide(&debt, t0, 1); d.Allowed || d.RetryAfter != 101_000 {
		t.Errorf("debt after lowering the burst: %+v, want refused for 101 s", d)
	}
	high := Limit{Kind: TokenBucket, Count: 1, Period: 1000, Burst: 1000}
	if d := high.Decide(&debt, t0, 1); d.Allowed || d.RetryAfter != 101_000 {
		t.Errorf("debt after raising the burst: %+v, want refused for 101 s", d)
	}
	// …while a plain deficit beyond a lowered burst is an empty bucket.
	var full State
	for range 100 {
		l.Decide(&full, t0, 1)
	}
	if d := low.Decide(&full, t0, 1); d.Allowed || d.RetryAfter != 1000 {
		t.Errorf("lowered burst without debt: %+v, want refused for 1 s (empty, not in debt)", d)
	}
	// A refund repays a debt first.
	l.Refund(&debt, t0, 150)
	if d := l.Decide(&debt, t0, 1); !d.Allowed || d.Remaining != 49 {
		t.Errorf("after refunding 150 of a 100 debt: %+v, want allowed with 49 left", d)
	}
}

// TestForceChargeCaps: the windows and the leaky bucket take the charge
// up to their caps; the sliding log stays within Count entries;
// concurrency and cost 0 change nothing.
func TestForceChargeCaps(t *testing.T) {
	const now = 1_700_000_010_000
	for _, tc := range []struct {
		l    Limit
		cost int64
		want State
	}{
		{Limit{Kind: FixedWindow, Count: 10, Period: 60_000}, 15, State{A: now / 60_000, B: 10}}, // min(cost, quota)
		{Limit{Kind: SlidingWindow, Count: 10, Period: 60_000}, 7, State{A: now / 60_000, B: 7}},
		{Limit{Kind: LeakyBucket, Count: 1, Period: 1000, Burst: 2}, 9, State{A: 2000, B: now, C: 1}}, // idle −P + 3 requests
		{Limit{Kind: SlidingLog, Count: 3, Period: 60_000}, 5, State{Log: []int64{now, now, now}}},
		{Limit{Kind: Concurrency, Count: 3, Period: 60_000}, 5, State{}},
	} {
		var s State
		tc.l.ForceCharge(&s, now, tc.cost)
		tc.l.ForceCharge(&s, now, 0)
		if s.A != tc.want.A || s.B != tc.want.B || s.C != tc.want.C || len(s.Log) != len(tc.want.Log) {
			t.Errorf("%v cost %d: state %+v, want %+v", tc.l.String(), tc.cost, s, tc.want)
		}
	}
	fw := Limit{Kind: FixedWindow, Count: 10, Period: 60_000}
	s := State{A: now / 60_000, B: 15}
	fw.ForceCharge(&s, now, 10)
	if s.B != 20 {
		t.Errorf("fixed window beyond its limit: n %d, want the cap 20", s.B)
	}
}
