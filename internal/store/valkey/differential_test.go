package valkey

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/testutil/redisserver"
)

// model is the Go reference (package algo) for a set of keys, with the
// store's multi-check rule: charge all or none, refusals report peeks.
type model map[string]*algo.State

// decide mirrors Store.Decide on the Go math.
func (m model) decide(checks []store.Check, now int64, out []algo.Decision) {
	next := make([]algo.State, len(checks))
	all := true
	for i, c := range checks {
		if m[c.Key] == nil {
			m[c.Key] = &algo.State{}
		}
		next[i] = *m[c.Key] // shallow copy: algo.Limit.Decide allows it
		out[i] = c.Limit.DecideLease(&next[i], now, c.Cost, c.Lease)
		all = all && out[i].Allowed
	}
	for i, c := range checks {
		switch {
		case all:
			*m[c.Key] = next[i]
		case out[i].Allowed:
			out[i] = c.Limit.DecideLease(m[c.Key], now, 0, c.Lease)
		}
	}
}

// diffRunner feeds the same decisions to the Valkey store and the model and
// fails at the first difference, with the step that shows it.
type diffRunner struct {
	t       *testing.T
	st      *Store
	m       model
	steps   int
	refused int // checks refused, to show the traffic exercises both paths
	// srv, when set, also checks that every charged key's PTTL is
	// algo.Limit.IdleMillis, less the real ms measured since the script
	// was sent.
	srv *redisserver.Server
	// writes is each key's last charge: when its script was sent and the
	// IdleMillis it set as PTTL. Valkey expires keys by its own real
	// clock while the steps' now is fake, so a key charged 1 ms from full
	// may be gone at the next step though now has not moved.
	writes map[string]write
}

// write is a key's last charge as Valkey saw it.
type write struct {
	sent time.Time
	idle int64 // ms
}

// modelDecide is the model's answer; where it differs from got, and a
// key's PTTL had run out in real time before the reply (so Valkey may
// have expired it), the answer for those keys gone is the one that must
// match, and the model takes that path.
func (r *diffRunner) modelDecide(checks []store.Check, now int64, replied time.Time, got, want []algo.Decision) {
	saved := make(map[string]algo.State, len(checks))
	for _, c := range checks {
		if s := r.m[c.Key]; s != nil {
			saved[c.Key] = *s
		}
	}
	r.m.decide(checks, now, want)
	if slices.Equal(got, want) {
		return
	}
	lapsed := false
	for k, st := range saved {
		if w, ok := r.writes[k]; ok && replied.Sub(w.sent).Milliseconds() >= w.idle {
			delete(r.m, k)
			lapsed = true
		} else {
			*r.m[k] = st
		}
	}
	if !lapsed {
		for k, st := range saved {
			*r.m[k] = st
		}
		r.m.decide(checks, now, want) // the same answer again, for the failure's message
		return
	}
	r.m.decide(checks, now, want)
}

func (r *diffRunner) decide(checks []store.Check, now int64) {
	r.t.Helper()
	r.steps++
	got := make([]algo.Decision, len(checks))
	want := make([]algo.Decision, len(checks))
	sent := time.Now()
	used, err := r.st.Decide(context.Background(), checks, now, got)
	if err != nil {
		r.t.Fatalf("step %d: Decide: %v", r.steps, err)
	}
	replied := time.Now()
	if used != now {
		r.t.Fatalf("step %d: Decide used now %d, want %d", r.steps, used, now)
	}
	r.modelDecide(checks, now, replied, got, want)
	for i := range checks {
		if !got[i].Allowed {
			r.refused++
		}
		c := checks[i]
		if got[i] != want[i] {
			r.t.Fatalf("step %d, check %d of %d (%s, key %s, cost %d, lease %q) at B%+d ms:\nvalkey %+v\nalgo   %+v",
				r.steps, i, len(checks), c.Limit.String(), c.Key, c.Cost, c.Lease, now-base, got[i], want[i])
		}
		if got[i].Allowed && c.Cost > 0 && (c.Limit.Kind != algo.Concurrency || c.Lease != "") {
			idle := max(c.Limit.IdleMillis(r.m[c.Key], now), 1)
			if r.writes == nil {
				r.writes = map[string]write{}
			}
			r.writes[c.Key] = write{sent: sent, idle: idle}
		}
		if r.srv != nil && got[i].Allowed && c.Cost > 0 && (c.Limit.Kind != algo.Concurrency || c.Lease != "") {
			idle := max(c.Limit.IdleMillis(r.m[c.Key], now), 1)
			pttl, err := r.srv.Do(r.t, "PTTL", c.Key).AsInt64()
			elapsed := time.Since(sent).Milliseconds()
			gone := pttl == -2 && elapsed >= idle // expired already: the whole TTL has passed in real time
			if !gone && (err != nil || pttl > idle || pttl < idle-elapsed-1) {
				r.t.Fatalf("step %d (%s, key %s) at B%+d ms: PTTL %d, %v; want IdleMillis %d",
					r.steps, c.Limit.String(), c.Key, now-base, pttl, err, idle)
			}
		}
	}
}

func (r *diffRunner) release(c store.Check, now int64) {
	r.t.Helper()
	if err := r.st.Release(context.Background(), []store.Check{c}); err != nil {
		r.t.Fatalf("step %d: Release: %v", r.steps, err)
	}
	if s := r.m[c.Key]; s != nil {
		s.Release(c.Lease, now)
	}
}

// TestDifferentialReference: docs/PRODUCT.md's reference traffic gives identical
// decisions (every field, to the ms) from the Lua scripts and package algo.
func TestDifferentialReference(t *testing.T) {
	st, _ := newStore(t)
	r := &diffRunner{t: t, st: st, m: model{}}
	for _, p := range algo.ReferencePatterns() {
		for a, l := range algo.ReferenceLimits() {
			key := fmt.Sprintf("rl:v2:{diffref}:%s:%d", p.Name, a)
			for _, now := range p.Times {
				r.decide([]store.Check{{Key: key, Limit: l, Cost: 1}}, now)
			}
		}
	}
}

// diffKinds orders diffLimits so seeded traffic is reproducible.
var diffKinds = []algo.Kind{algo.FixedWindow, algo.SlidingLog, algo.SlidingWindow, algo.TokenBucket, algo.LeakyBucket, algo.Concurrency}

// diffLimits are the limits of the random differential traffic, per kind:
// 3r/s, 30r/m, 1r/m and 10 per 10 s, with bucket variants.
var diffLimits = map[algo.Kind][]algo.Limit{
	algo.FixedWindow: {
		{Kind: algo.FixedWindow, Count: 3, Period: 1000},
		{Kind: algo.FixedWindow, Count: 30, Period: 60_000},
		{Kind: algo.FixedWindow, Count: 1, Period: 60_000},
		{Kind: algo.FixedWindow, Count: 10, Period: 10_000},
	},
	algo.SlidingLog: {
		{Kind: algo.SlidingLog, Count: 3, Period: 1000},
		{Kind: algo.SlidingLog, Count: 30, Period: 60_000},
		{Kind: algo.SlidingLog, Count: 1, Period: 60_000},
		{Kind: algo.SlidingLog, Count: 10, Period: 10_000},
	},
	algo.SlidingWindow: {
		{Kind: algo.SlidingWindow, Count: 3, Period: 1000},
		{Kind: algo.SlidingWindow, Count: 30, Period: 60_000},
		{Kind: algo.SlidingWindow, Count: 1, Period: 60_000},
		{Kind: algo.SlidingWindow, Count: 10, Period: 10_000},
	},
	algo.TokenBucket: {
		{Kind: algo.TokenBucket, Count: 3, Period: 1000, Burst: 5},
		{Kind: algo.TokenBucket, Count: 30, Period: 60_000, Burst: 5},
		{Kind: algo.TokenBucket, Count: 1, Period: 60_000, Burst: 1},
		{Kind: algo.TokenBucket, Count: 1, Period: 1000, Burst: 10},
	},
	algo.LeakyBucket: {
		{Kind: algo.LeakyBucket, Count: 3, Period: 1000, Burst: 5, Delay: 2},
		{Kind: algo.LeakyBucket, Count: 30, Period: 60_000},
		{Kind: algo.LeakyBucket, Count: 1, Period: 60_000, Burst: 3, NoDelay: true},
		{Kind: algo.LeakyBucket, Count: 1, Period: 1000, Burst: 9},
	},
	algo.Concurrency: {
		{Kind: algo.Concurrency, Count: 3, Period: 1000},
		{Kind: algo.Concurrency, Count: 2, Period: 60_000},
		{Kind: algo.Concurrency, Count: 1, Period: 10_000},
	},
}

// randomGap draws the ms to the next request: often 0 (same ms),
// mostly below or around the limit's spacing (some refusals), sometimes
// longer than the window.
func randomGap(rng *rand.Rand, l algo.Limit) int64 {
	spacing := max(l.Period/l.Count, 1)
	switch x := rng.IntN(100); {
	case x < 15:
		return 0
	case x < 55:
		return rng.Int64N(spacing)
	case x < 85:
		return rng.Int64N(2 * spacing)
	case x < 95:
		return rng.Int64N(l.Period + 1)
	default:
		return l.Period + rng.Int64N(2*l.Period)
	}
}

// randomCost draws a cost: mostly 1, some peeks and larger costs, some
// beyond the limit's quota (never acceptable).
func randomCost(rng *rand.Rand, l algo.Limit) int64 {
	switch x := rng.IntN(100); {
	case x < 70:
		return 1
	case x < 80:
		return 0
	case x < 95:
		return 1 + rng.Int64N(3)
	default:
		return l.Quota() + 1
	}
}

// TestDifferentialRandom: 10,000 seeded random requests per algorithm from
// several clients give identical decisions from the scripts and package
// algo, and every charged key's expiry is algo's IdleMillis; then
// multi-check decisions across algorithms agree too.
func TestDifferentialRandom(t *testing.T) {
	st, srv := newStore(t)
	const clients, perKind = 5, 10_000
	for _, kind := range diffKinds {
		limits := diffLimits[kind]
		t.Run(kind.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(kind), 42))
			r := &diffRunner{t: t, st: st, m: model{}, srv: srv}
			now := base + rng.Int64N(100_000)
			for r.steps < perKind {
				l := limits[rng.IntN(len(limits))]
				client := rng.IntN(clients)
				key := fmt.Sprintf("rl:v2:{c%d}:%d:%d", client, kind, l.Count*1_000_000+l.Period)
				now += randomGap(rng, l) / clients
				c := store.Check{Key: key, Limit: l, Cost: randomCost(rng, l)}
				if kind == algo.Concurrency {
					c.Lease = fmt.Sprint("req-", rng.IntN(6))
					if rng.IntN(4) == 0 {
						r.release(c, now)
						continue
					}
				}
				r.decide([]store.Check{c}, now)
			}
			t.Logf("%d requests (%d refused), identical decisions", r.steps, r.refused)
		})
	}
	t.Run("multi-check", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 42))
		r := &diffRunner{t: t, st: st, m: model{}}
		now := base
		for range perKind / 2 {
			client := rng.IntN(clients)
			var checks []store.Check
			for _, kind := range diffKinds {
				if rng.IntN(2) == 0 {
					continue
				}
				limits := diffLimits[kind]
				l := limits[rng.IntN(len(limits))]
				checks = append(checks, store.Check{
					Key:   fmt.Sprintf("rl:v2:{m%d}:%d:%d", client, kind, l.Count*1_000_000+l.Period),
					Limit: l, Cost: randomCost(rng, l), Lease: fmt.Sprint("req-", rng.IntN(6)),
				})
			}
			if len(checks) == 0 {
				continue
			}
			now += rng.Int64N(700)
			r.decide(checks, now)
		}
		t.Logf("%d multi-check decisions (%d checks refused), identical", r.steps, r.refused)
	})
}
