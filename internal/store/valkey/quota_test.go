package valkey

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"

	"rlproxy/internal/testutil/quotasteps"
)

// TestQuotaSizes runs the plan-sized step tables (package quotasteps)
// through the Lua scripts on a real redis-server, and checks each charged
// key's expiry against algo.Limit.IdleMillis.
func TestQuotaSizes(t *testing.T) {
	st, srv := newStore(t)
	for _, c := range quotasteps.Cases() {
		key := "rl:v2:{quota}:" + c.Name
		for i, s := range c.Steps {
			got := decide1(t, st, key, c.Limit, s.Cost, "", c.Start+s.At)
			if got != s.Want {
				t.Errorf("%s step %d (+%d ms, cost %d):\n got %+v\nwant %+v", c.Name, i, s.At, s.Cost, got, s.Want)
			}
		}
		if pttl, err := srv.Do(t, "PTTL", key).AsInt64(); err != nil || pttl <= 0 {
			t.Errorf("%s: PTTL %d, %v: want the state to expire", c.Name, pttl, err)
		}
	}
}

// TestDifferentialQuotaSizes: seeded random traffic on plan-sized limits
// (large costs, gaps across whole windows) gives identical decisions from
// the scripts and package algo, expiries included. The sliding counters'
// products prev·(W−elapsed) pass 2^53 here, so the scripts' multiply-divide
// takes its long path.
func TestDifferentialQuotaSizes(t *testing.T) {
	st, srv := newStore(t)
	limits := []algo.Limit{
		{Kind: algo.SlidingWindow, Count: 100_000_000, Period: day},
		{Kind: algo.SlidingWindow, Count: 10_000_000, Period: 30 * day},
		{Kind: algo.SlidingWindow, Count: 1_000_000_000_000, Period: algo.MaxPeriod},
		{Kind: algo.SlidingWindow, Count: 999_999_999_989, Period: 7*day + 13},
		{Kind: algo.FixedWindow, Count: 1_000_000_000_000, Period: algo.MaxPeriod},
		{Kind: algo.TokenBucket, Count: 1_000_000, Period: 1000, Burst: 1_000_000_000_000},
		{Kind: algo.TokenBucket, Count: 1, Period: day, Burst: 1_000_000},
		{Kind: algo.LeakyBucket, Count: 7, Period: day, Burst: 13_031_246},
	}
	rng := rand.New(rand.NewPCG(16, 42))
	r := &diffRunner{t: t, st: st, m: model{}, srv: srv}
	for i, l := range limits {
		now := base + rng.Int64N(l.Period)
		key := fmt.Sprintf("rl:v2:{big}:%d", i)
		for range 300 {
			cost := int64(1)
			switch x := rng.IntN(10); {
			case x < 4:
				cost = 1 + rng.Int64N(l.Quota()/3)
			case x < 5:
				cost = 0
			}
			switch x := rng.IntN(10); {
			case x < 3:
			case x < 8:
				now += rng.Int64N(l.WindowMillis()/5 + 1)
			default:
				now += rng.Int64N(1000)
			}
			r.decide([]store.Check{{Key: key, Limit: l, Cost: cost}}, now)
		}
	}
	t.Logf("%d requests (%d refused), identical decisions", r.steps, r.refused)
}

const day = 86_400_000
