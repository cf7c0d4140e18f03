package algo

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// step is one request at a fixed instant: at ms after the test's base time,
// with cost requests and, for Concurrency, a lease id; release names a lease
// to end just before.
type step struct {
	at      int64
	cost    int64
	lease   string
	release string
	want    Decision
}

// runSteps decides each step in order on one state and reports the first
// step that differs.
func runSteps(t *testing.T, l Limit, base int64, steps []step) {
	t.Helper()
	if err := l.Validate(); err != nil {
		t.Fatalf("%v: %v", &l, err)
	}
	var s State
	for i, st := range steps {
		now := base + st.at
		if st.release != "" {
			s.Release(st.release, now)
		}
		got := l.DecideLease(&s, now, st.cost, st.lease)
		if got != st.want {
			t.Fatalf("%v, step %d (t=%d ms, cost %d): got %+v, want %+v", &l, i, st.at, st.cost, got, st.want)
		}
	}
}

// ok and no build expected decisions: accepted or refused.
func ok(remaining, wait, reset int64) Decision {
	return Decision{Allowed: true, Remaining: remaining, Wait: wait, ResetAfter: reset}
}

func no(remaining, retry, reset int64) Decision {
	return Decision{Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

const B = ReferenceBase

// docs/PRODUCT.md's API example: token bucket burst 5, one token per 2 s (30r/m):
// five pass, the sixth gets Retry-After 2 (1,950 ms), r=0, t=10 (9,950 ms);
// four seconds later a request passes.
func TestTokenBucketAPIExample(t *testing.T) {
	l := Limit{Kind: TokenBucket, Count: 30, Period: 60_000, Burst: 5}
	if q, w := l.Quota(), l.WindowMillis(); q != 5 || w != 10_000 {
		t.Fatalf("q=%d w=%d ms, want q=5 w=10000", q, w)
	}
	runSteps(t, l, B, []step{
		{at: 0, cost: 1, want: ok(4, 0, 2000)},
		{at: 10, cost: 1, want: ok(3, 0, 3990)},
		{at: 20, cost: 1, want: ok(2, 0, 5980)},
		{at: 30, cost: 1, want: ok(1, 0, 7970)},
		{at: 40, cost: 1, want: ok(0, 0, 9960)},
		{at: 50, cost: 1, want: no(0, 1950, 9950)},
		{at: 60, cost: 1, want: no(0, 1940, 9940)},
		{at: 60, cost: 0, want: ok(0, 0, 9940)}, // peek
		{at: 4060, cost: 1, want: ok(1, 0, 7940)},
	})
}

func TestTokenBucket(t *testing.T) {
	l := Limit{Kind: TokenBucket, Count: 1, Period: 1000, Burst: 10}
	runSteps(t, l, B, []step{
		{at: 0, cost: 0, want: ok(10, 0, 0)}, // idle: full
		{at: 0, cost: 4, want: ok(6, 0, 4000)},
		{at: 500, cost: 7, want: no(6, 500, 3500)},
		{at: 1000, cost: 7, want: ok(0, 0, 10_000)},
		{at: 1000, cost: 11, want: no(0, 0, 10_000)}, // above the quota: never
		{at: 1999, cost: 1, want: no(0, 1, 9001)},
		{at: 2000, cost: 1, want: ok(0, 0, 10_000)},
		{at: 100_000, cost: 10, want: ok(0, 0, 10_000)}, // refilled, no more than full
	})
}

// nginx limit_req arithmetic: one request per 1/rate, exact (30r/m = one per
// 2,000 ms; 1r/m one per 60,000 ms where nginx truncates to 62.5 s; 3r/s one
// per 333⅓ ms).
func TestLeakyBucketNginxRates(t *testing.T) {
	runSteps(t, Limit{Kind: LeakyBucket, Count: 30, Period: 60_000}, B, []step{
		{at: 0, cost: 1, want: ok(0, 0, 2000)},
		{at: 1999, cost: 1, want: no(0, 1, 1)},
		{at: 2000, cost: 1, want: ok(0, 0, 2000)},
		{at: 4001, cost: 1, want: ok(0, 0, 2000)},
		{at: 4001, cost: 0, want: ok(0, 0, 2000)},
	})
	runSteps(t, Limit{Kind: LeakyBucket, Count: 1, Period: 60_000}, B, []step{
		{at: 0, cost: 1, want: ok(0, 0, 60_000)},
		{at: 59_999, cost: 1, want: no(0, 1, 1)},
		{at: 60_000, cost: 1, want: ok(0, 0, 60_000)},
	})
	runSteps(t, Limit{Kind: LeakyBucket, Count: 3, Period: 1000, Burst: 2}, B, []step{
		{at: 0, cost: 1, want: ok(2, 0, 334)},
		{at: 0, cost: 1, want: ok(1, 334, 667)},
		{at: 0, cost: 1, want: ok(0, 667, 1000)},
		{at: 0, cost: 1, want: no(0, 334, 1000)},
		{at: 333, cost: 1, want: no(0, 1, 667)},    // 1 unit short
		{at: 334, cost: 1, want: ok(0, 666, 1000)}, // 2000 − 334·3 + 1000 = 1998 units
	})
}

func TestLeakyBucketDelayModes(t *testing.T) {
	base := Limit{Kind: LeakyBucket, Count: 1, Period: 1000, Burst: 9}
	delay := base
	delay.Delay = 2
	nodelay := base
	nodelay.NoDelay = true
	for _, c := range []struct {
		l     Limit
		waits []int64
	}{
		{base, []int64{0, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000}},
		{delay, []int64{0, 0, 0, 1000, 2000, 3000, 4000, 5000, 6000, 7000}},
		{nodelay, []int64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
	} {
		var steps []step
		for i, w := range c.waits {
			steps = append(steps, step{at: 0, cost: 1, want: ok(int64(9-i), w, int64(i+1)*1000)})
		}
		steps = append(steps,
			step{at: 0, cost: 1, want: no(0, 1000, 10_000)},
			step{at: 999, cost: 1, want: no(0, 1, 9001)},
			step{at: 1000, cost: 1, want: ok(0, c.waits[9], 10_000)},
		)
		runSteps(t, c.l, B, steps)
	}
}

func TestLeakyBucketCost(t *testing.T) {
	l := Limit{Kind: LeakyBucket, Count: 1, Period: 1000, Burst: 5, NoDelay: true}
	runSteps(t, l, B, []step{
		{at: 0, cost: 0, want: ok(6, 0, 0)}, // idle: q = burst + 1
		{at: 0, cost: 3, want: ok(3, 0, 3000)},
		{at: 0, cost: 4, want: no(3, 1000, 3000)},
		{at: 500, cost: 0, want: ok(3, 0, 2500)},
		{at: 1000, cost: 4, want: ok(0, 0, 6000)},
		{at: 1000, cost: 7, want: no(0, 0, 6000)}, // above the quota: never
	})
}

func TestFixedWindow(t *testing.T) {
	l := Limit{Kind: FixedWindow, Count: 3, Period: 10_000}
	runSteps(t, l, B, []step{
		{at: 9998, cost: 1, want: ok(2, 0, 2)},
		{at: 9998, cost: 1, want: ok(1, 0, 2)},
		{at: 9998, cost: 1, want: ok(0, 0, 2)},
		{at: 9999, cost: 1, want: no(0, 1, 1)},
		{at: 10_000, cost: 1, want: ok(2, 0, 10_000)},
		{at: 10_001, cost: 2, want: ok(0, 0, 9999)},
		{at: 10_002, cost: 1, want: no(0, 9998, 9998)},
		{at: 10_002, cost: 0, want: ok(0, 0, 9998)},
		{at: 20_000, cost: 3, want: ok(0, 0, 10_000)},
		{at: 45_000, cost: 4, want: no(3, 0, 5000)}, // above the quota: never
	})
}

func TestSlidingWindow(t *testing.T) {
	l := Limit{Kind: SlidingWindow, Count: 10, Period: 10_000}
	steps := []step{}
	for i := range int64(10) {
		steps = append(steps, step{at: 9500 + 50*i, cost: 1, want: ok(9-i, 0, 500-50*i)})
	}
	steps = append(steps,
		// Estimate 10·(10000−0)/10000 = 10: refused, 1 ms later 9.999 passes.
		step{at: 10_000, cost: 1, want: no(0, 1, 10_000)},
		// Estimate 9.95 < 10: accepted, r = 0 (docs/CONTRACT.md).
		step{at: 10_050, cost: 1, want: ok(0, 0, 9950)},
		// 10·(W−el)/W + 1 < 10 first at el = 1001.
		step{at: 10_100, cost: 1, want: no(0, 901, 9900)},
		step{at: 11_000, cost: 1, want: no(0, 1, 9000)},
		step{at: 11_001, cost: 1, want: ok(0, 0, 8999)},
		// prev 10, curr 2: with c = 9 nothing fits this window; next window
		// prev' = 2 needs 2·(W−el'') < 2·W: el'' = 1.
		step{at: 15_000, cost: 9, want: no(3, 5001, 5000)},
		step{at: 20_001, cost: 9, want: ok(0, 0, 9999)},
	)
	runSteps(t, l, B, steps)

	// Next-window retry: limit 2 per 1000 ms.
	runSteps(t, Limit{Kind: SlidingWindow, Count: 2, Period: 1000}, B, []step{
		{at: 0, cost: 2, want: ok(0, 0, 1000)},
		{at: 500, cost: 1, want: no(0, 501, 500)},
		{at: 1000, cost: 1, want: no(0, 1, 1000)},
		{at: 1001, cost: 1, want: ok(0, 0, 999)},
	})
	// Window of 1 ms: the wait runs past the next window (2·W − el).
	runSteps(t, Limit{Kind: SlidingWindow, Count: 1, Period: 1}, B, []step{
		{at: 0, cost: 1, want: ok(0, 0, 1)},
		{at: 0, cost: 1, want: no(0, 2, 1)},
		{at: 1, cost: 1, want: no(0, 1, 1)},
		{at: 2, cost: 1, want: ok(0, 0, 1)},
	})
}

func TestSlidingLog(t *testing.T) {
	l := Limit{Kind: SlidingLog, Count: 3, Period: 1000}
	runSteps(t, l, B, []step{
		{at: 0, cost: 0, want: ok(3, 0, 0)},
		{at: 0, cost: 2, want: ok(1, 0, 1000)},
		{at: 0, cost: 1, want: ok(0, 0, 1000)}, // three entries in one ms
		{at: 500, cost: 1, want: no(0, 500, 500)},
		{at: 999, cost: 1, want: no(0, 1, 1)},
		{at: 1000, cost: 1, want: ok(2, 0, 1000)}, // t ≤ now − W pruned
		{at: 1200, cost: 2, want: ok(0, 0, 1000)},
		{at: 1300, cost: 2, want: no(0, 900, 900)}, // k = 2: the 2nd entry (1200)
		{at: 1300, cost: 4, want: no(0, 0, 900)},   // above the quota: never
		{at: 2000, cost: 1, want: ok(0, 0, 1000)},  // 1000 left
		{at: 2100, cost: 1, want: no(0, 100, 900)},
	})

	// Out of order (replay): entries stay ascending and the caller's slice
	// is not changed.
	var s State
	for _, at := range []int64{B + 10, B + 30, B + 20} {
		l.Decide(&s, at, 1)
	}
	if want := []int64{B + 10, B + 20, B + 30}; !slices.Equal(s.Log, want) {
		t.Fatalf("log %v, want %v", s.Log, want)
	}
	s = State{Log: []int64{B + 10, B + 30}}
	keep := s
	l.Decide(&s, B+20, 1)
	if !slices.Equal(keep.Log, []int64{B + 10, B + 30}) {
		t.Fatalf("caller's log changed: %v", keep.Log)
	}
}

func TestConcurrency(t *testing.T) {
	l := Limit{Kind: Concurrency, Count: 2, Period: 30_000}
	runSteps(t, l, B, []step{
		{at: 0, cost: 0, lease: "a", want: ok(2, 0, 0)}, // peek
		{at: 0, cost: 1, lease: "a", want: ok(1, 0, 30_000)},
		{at: 10, cost: 1, lease: "b", want: ok(0, 0, 30_000)},
		{at: 20, cost: 1, lease: "c", want: no(0, 29_980, 29_990)},
		{at: 20, cost: 1, want: no(0, 29_980, 29_990)},                            // no lease: peek
		{at: 100, cost: 1, lease: "a", want: ok(0, 0, 30_000)},                    // refresh
		{at: 200, cost: 1, lease: "c", release: "c", want: no(0, 29_810, 29_900)}, // c held nothing
		{at: 300, cost: 1, lease: "c", release: "b", want: ok(0, 0, 30_000)},
		{at: 30_100, cost: 1, lease: "d", want: ok(0, 0, 30_000)}, // a expired
	})
}

// TestIdleMillis: once IdleMillis has passed, the state decides every cost
// exactly as the zero state; one ms earlier it does not (peek differs).
func TestIdleMillis(t *testing.T) {
	limits := append(ReferenceLimits(),
		Limit{Kind: LeakyBucket, Count: 3, Period: 1000, Burst: 4, Delay: 1},
		Limit{Kind: TokenBucket, Count: 7, Period: 60_000, Burst: 3},
		Limit{Kind: SlidingWindow, Count: 3, Period: 700},
		Limit{Kind: Concurrency, Count: 3, Period: 900},
	)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, l := range limits {
		var s State
		now := B
		for i := range 3000 {
			now += rng.Int64N(400)
			l.DecideLease(&s, now, 1+rng.Int64N(2), string(rune('a'+i%5)))
			e := l.IdleMillis(&s, now)
			if e == 0 {
				continue
			}
			for _, c := range []int64{0, 1, l.Quota()} {
				at := now + e
				a, idle := s, State{}
				if got, want := l.DecideLease(&a, at, c, "z"), l.DecideLease(&idle, at, c, "z"); got != want {
					t.Fatalf("%v: at idle+0 (%d ms after step %d) cost %d: %+v, idle state gives %+v", &l, e, i, c, got, want)
				}
			}
			a, idle := s, State{}
			if got, want := l.Decide(&a, now+e-1, 0), l.Decide(&idle, now+e-1, 0); got == want {
				t.Fatalf("%v: idle 1 ms before IdleMillis (%d ms after step %d): %+v", &l, e, i, got)
			}
		}
	}
}

func TestQuotaWindowString(t *testing.T) {
	for _, c := range []struct {
		l    Limit
		q, w int64
		s    string
	}{
		{Limit{Kind: LeakyBucket, Count: 10, Period: 1000, Burst: 20, NoDelay: true}, 21, 2100, "leaky bucket 10 r/s (burst 20, nodelay)"},
		{Limit{Kind: LeakyBucket, Count: 30, Period: 60_000, Burst: 5, Delay: 3}, 6, 12_000, "leaky bucket 30 r/m (burst 5, delay 3)"},
		{Limit{Kind: LeakyBucket, Count: 3, Period: 1000}, 1, 334, "leaky bucket 3 r/s (burst 0)"},
		{Limit{Kind: TokenBucket, Count: 30, Period: 60_000, Burst: 5}, 5, 10_000, "token bucket 30 r/m (burst 5)"},
		{Limit{Kind: TokenBucket, Count: 5, Period: 3_600_000, Burst: 1}, 1, 720_000, "token bucket 5 r/h (burst 1)"},
		{Limit{Kind: FixedWindow, Count: 100, Period: 3_600_000}, 100, 3_600_000, "fixed window 100 per 1h"},
		{Limit{Kind: SlidingWindow, Count: 10, Period: 10_000}, 10, 10_000, "sliding counter 10 per 10s"},
		{Limit{Kind: SlidingLog, Count: 1000, Period: 86_400_000}, 1000, 86_400_000, "sliding log 1000 per 24h"},
		{Limit{Kind: Concurrency, Count: 4, Period: 30_000}, 4, 30_000, "concurrency 4 (lease 30s)"},
	} {
		if err := c.l.Validate(); err != nil {
			t.Errorf("%v: %v", &c.l, err)
		}
		if q, w, s := c.l.Quota(), c.l.WindowMillis(), c.l.String(); q != c.q || w != c.w || s != c.s {
			t.Errorf("got q=%d w=%d %q, want q=%d w=%d %q", q, w, s, c.q, c.w, c.s)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		l    Limit
		want string
	}{
		{Limit{Kind: 9, Count: 1, Period: 1000}, "unknown algorithm 9"},
		{Limit{Kind: FixedWindow, Count: 0, Period: 1000}, "count 0: want 1..1000000000000 for the fixed window"},
		{Limit{Kind: FixedWindow, Count: 1, Period: 0}, "period 0 ms: want 1..31622400000"},
		{Limit{Kind: FixedWindow, Count: 1, Period: MaxPeriod + 1}, "period 31622400001 ms: want 1..31622400000"},
		{Limit{Kind: TokenBucket, Count: 1, Period: 1000}, "token bucket burst must be at least 1"},
		{Limit{Kind: LeakyBucket, Count: 1, Period: 1000, Burst: -1}, "burst -1: want 0..1000000000000"},
		{Limit{Kind: LeakyBucket, Count: 1, Period: 1000, Burst: 5, Delay: 2, NoDelay: true}, "delay and nodelay are mutually exclusive"},
		{Limit{Kind: TokenBucket, Count: 1, Period: 1000, Burst: 5, NoDelay: true}, "delay and nodelay apply to the leaky bucket only, not token bucket"},
		{Limit{Kind: FixedWindow, Count: 1, Period: 1000, Burst: 5}, "burst applies to the buckets only, not fixed window"},
		{Limit{Kind: SlidingWindow, Count: 100_000_000, Period: 86_400_000}, ""},
		{Limit{Kind: SlidingWindow, Count: 1_000_000_000_000, Period: MaxPeriod}, ""},
		{Limit{Kind: SlidingWindow, Count: 1_000_000_000_001, Period: 1000}, "count 1000000000001: want 1..1000000000000 for the sliding counter"},
		{Limit{Kind: FixedWindow, Count: 1_000_000_000_000, Period: MaxPeriod}, ""},
		{Limit{Kind: SlidingLog, Count: 100_000, Period: 86_400_000}, ""},
		{Limit{Kind: SlidingLog, Count: 100_001, Period: 86_400_000}, "count 100001: want 1..100000 for the sliding log"},
		{Limit{Kind: TokenBucket, Count: 1_000_000, Period: 1000, Burst: 1_000_000_000_000}, ""},
		{Limit{Kind: TokenBucket, Count: 1, Period: 86_400_000, Burst: 1_000_000}, ""},
		{Limit{Kind: TokenBucket, Count: 1, Period: 86_400_000, Burst: 13_031_247}, ""},
		{Limit{Kind: TokenBucket, Count: 1, Period: 86_400_000, Burst: 13_031_248}, "token bucket 1 r/d (burst 13031248): burst times period exceeds 2^50 (exact arithmetic): the largest burst at this rate is 13031247"},
		{Limit{Kind: LeakyBucket, Count: 1, Period: 86_400_000, Burst: 13_031_247}, "leaky bucket 1 r/d (burst 13031247): burst times period exceeds 2^50 (exact arithmetic): the largest burst at this rate is 13031246"},
		{Limit{Kind: TokenBucket, Count: 1_000_000_000, Period: MaxPeriod, Burst: 1}, "token bucket 1000000000 r/8784h (burst 1): rate count times period exceeds 2^50 (exact arithmetic): at most 35604 per 8784h"},
		{Limit{Kind: Concurrency, Count: 1_000_000_001, Period: 1000}, "count 1000000001: want 1..1000000000 for the concurrency"},
		{Limit{Kind: LeakyBucket, Count: 1, Period: 1000, Burst: 5, Delay: 9}, ""}, // nginx: delay ≥ burst delays nothing
	} {
		err := c.l.Validate()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%+v: got %q, want %q", c.l, got, c.want)
		}
	}
}

// A refused request and a peek leave the state exactly as it was.
func TestRefusalAndPeekChangeNothing(t *testing.T) {
	for _, l := range append(ReferenceLimits(), Limit{Kind: Concurrency, Count: 2, Period: 1000}) {
		var s State
		for i := range int64(12) {
			l.DecideLease(&s, B+i, 1, string(rune('a'+i)))
		}
		before := s
		before.Log, before.Leases = slices.Clone(s.Log), slices.Clone(s.Leases)
		if d := l.DecideLease(&s, B+20, 1, "z"); d.Allowed {
			t.Fatalf("%v: 13th request accepted", &l)
		}
		l.DecideLease(&s, B+20, 0, "y")
		if !reflect.DeepEqual(s, before) {
			t.Fatalf("%v: state changed by a refusal or peek: %+v → %+v", &l, before, s)
		}
	}
}

// TestTokenBucketReloadedBurst: the token bucket keeps its deficit, so a
// reload that raises the burst admits at once and one that lowers it may
// refuse at once (docs/CONTRACT.md "Reload"), as the leaky bucket's excess does.
func TestTokenBucketReloadedBurst(t *testing.T) {
	const t0 = ReferenceBase
	five := Limit{Kind: TokenBucket, Count: 1, Period: 3_600_000, Burst: 5}
	var s State
	for i := range 5 {
		if d := five.Decide(&s, t0, 1); !d.Allowed {
			t.Fatalf("request %d refused", i+1)
		}
	}
	if d := five.Decide(&s, t0, 1); d.Allowed {
		t.Fatal("6th request accepted by a bucket of 5")
	}
	seven := five
	seven.Burst = 7
	if d := seven.Decide(&s, t0, 1); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("raised burst 7 after 5 taken: %+v, want accepted with 1 remaining", d)
	}
	three := five
	three.Burst = 3
	if d := three.Decide(&s, t0, 1); d.Allowed || d.Remaining != 0 || d.RetryAfter != 3_600_000 {
		t.Fatalf("lowered burst 3 after 6 taken: %+v, want refused, retry in one refill", d)
	}
	// Retry-After holds: one refill later a request passes.
	if d := three.Decide(&s, t0+3_600_000, 1); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("one refill after lowering: %+v, want accepted", d)
	}
}
