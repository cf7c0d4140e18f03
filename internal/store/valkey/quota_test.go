package valkey

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

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

// TestDifferentialCalendar: calendar windows (both kinds, every unit,
// zones with DST and with a 30-minute DST shift) give identical decisions
// and expiries from the scripts and package algo, on seeded random
// traffic around month ends, a year end and DST changes. The boundaries
// are Go's (algo.Calendar.SpanAt), passed to the script.
func TestDifferentialCalendar(t *testing.T) {
	st, srv := newStore(t)
	r := &diffRunner{t: t, st: st, m: model{}, srv: srv}
	rng := rand.New(rand.NewPCG(16, 2))
	around := []string{"2027-02-28T23:00:00Z", "2027-03-28T00:30:00+01:00", "2027-10-31T01:00:00+02:00",
		"2027-12-31T23:00:00Z", "2028-02-28T22:00:00Z", "2027-04-04T01:00:00+11:00"}
	i := 0
	for _, tz := range []string{"UTC", "Europe/Berlin", "Australia/Lord_Howe"} {
		for u := algo.Day; u <= algo.Year; u++ {
			cal, err := algo.NewCalendar(u, tz)
			if err != nil {
				t.Fatal(err)
			}
			for _, kind := range []algo.Kind{algo.FixedWindow, algo.SlidingWindow} {
				l := algo.Limit{Kind: kind, Count: 20, Period: cal.Longest(), Calendar: cal}
				i++
				key := fmt.Sprintf("rl:v2:{cal}:%d", i)
				v, _ := time.Parse(time.RFC3339, around[rng.IntN(len(around))])
				now := v.UnixMilli() - 3*3_600_000
				for range 150 {
					now += rng.Int64N(6 * 3_600_000 / 100)
					if rng.IntN(20) == 0 {
						now += rng.Int64N(l.Period)
					}
					r.decide([]store.Check{{Key: key, Limit: l, Cost: rng.Int64N(4)}}, now)
				}
			}
		}
	}
	t.Logf("%d requests (%d refused), identical decisions", r.steps, r.refused)
	// The server's own clock (now 0): the boundaries Go passes around its
	// clock hold the server's now.
	cal, _ := algo.NewCalendar(algo.Month, "Europe/Berlin")
	out := make([]algo.Decision, 1)
	l := algo.Limit{Kind: algo.SlidingWindow, Count: 5, Period: cal.Longest(), Calendar: cal}
	if _, err := st.Decide(context.Background(), []store.Check{{Key: "rl:v2:{cal}:now", Limit: l, Cost: 1}}, 0, out); err != nil || !out[0].Allowed || out[0].Remaining != 4 {
		t.Fatalf("server time: %+v, %v", out[0], err)
	}
}

// TestRefundCalendar: a refund of a calendar window's charge undoes it
// (refund_<name>_calendar in lua/<name>.lua), as algo.Limit.Refund does.
func TestRefundCalendar(t *testing.T) {
	st, _ := newStore(t)
	cal, _ := algo.NewCalendar(algo.Day, "Europe/Berlin")
	v, _ := time.Parse(time.RFC3339, "2027-03-28T20:00:00+02:00")
	now := v.UnixMilli()
	for _, kind := range []algo.Kind{algo.FixedWindow, algo.SlidingWindow} {
		l := algo.Limit{Kind: kind, Count: 10, Period: cal.Longest(), Calendar: cal}
		key := fmt.Sprintf("rl:v2:{calrefund}:%d", kind)
		ch := []store.Check{{Key: key, Limit: l, Cost: 3}}
		decide1(t, st, key, l, 4, "", now)
		decide1(t, st, key, l, 3, "", now)
		if err := st.Refund(context.Background(), ch, now); err != nil {
			t.Fatal(err)
		}
		var s algo.State
		l.Decide(&s, now, 4)
		want := l.Decide(&s, now, 0)
		if got := decide1(t, st, key, l, 0, "", now); got != want || got.Remaining != 6 {
			t.Errorf("%v after refund: %+v, want %+v", kind, got, want)
		}
	}
}

// TestDifferentialChargeCalendar: unconditional charges and refunds on
// calendar windows (charge_<name>_calendar in lua/<name>.lua) agree with
// the memory store and package algo's ForceCharge, expiries included, across
// Berlin's DST days and a month end.
func TestDifferentialChargeCalendar(t *testing.T) {
	st, srv := newStore(t)
	c := newChargeTrio(t, st, srv)
	rng := rand.New(rand.NewPCG(16, 3))
	start, _ := time.Parse(time.RFC3339, "2027-03-27T20:00:00+01:00")
	for u := algo.Day; u <= algo.Month; u++ {
		cal, err := algo.NewCalendar(u, "Europe/Berlin")
		if err != nil {
			t.Fatal(err)
		}
		for _, kind := range []algo.Kind{algo.FixedWindow, algo.SlidingWindow} {
			l := algo.Limit{Kind: kind, Count: 10, Period: cal.Longest(), Calendar: cal}
			key := fmt.Sprintf("rl:v2:{chcal}:%d:%d", u, kind)
			now := start.UnixMilli()
			for range 200 {
				now += rng.Int64N(3_600_000)
				ck := store.Check{Key: key, Limit: l, Cost: 1}
				if !c.decide([]store.Check{ck}, now) {
					continue
				}
				switch x := rng.IntN(10); {
				case x < 6:
					extra := ck
					extra.Cost = 1 + rng.Int64N(30)
					now += rng.Int64N(50)
					c.charge([]store.Check{extra}, now)
				case x < 8:
					c.refund([]store.Check{ck}, now)
				}
			}
		}
	}
	t.Logf("%d steps: identical", c.steps)
}
