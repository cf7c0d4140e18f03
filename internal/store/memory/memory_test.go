package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

const B = algo.ReferenceBase

// newStore returns a store with an injected clock (never read when the
// tests pass now) and no sweeper goroutine.
func newStore(t testing.TB, maxKeys int) *Store {
	t.Helper()
	s := New(Options{MaxKeys: maxKeys, Clock: func() int64 { return B }, SweepInterval: -1})
	t.Cleanup(func() { s.Close() })
	return s
}

// decide runs one decision and fails the test on error.
func decide(t testing.TB, s *Store, now int64, checks ...store.Check) []algo.Decision {
	t.Helper()
	out := make([]algo.Decision, len(checks))
	got, err := s.Decide(context.Background(), checks, now, out)
	if err != nil {
		t.Fatal(err)
	}
	if now != 0 && got != now {
		t.Fatalf("Decide used time %d, want %d", got, now)
	}
	return out
}

var (
	fixed5  = algo.Limit{Kind: algo.FixedWindow, Count: 5, Period: 3_600_000}
	fixed1  = algo.Limit{Kind: algo.FixedWindow, Count: 1, Period: 3_600_000}
	token10 = algo.Limit{Kind: algo.TokenBucket, Count: 1, Period: 1000, Burst: 10}
)

// The store reproduces docs/PRODUCT.md's reference table exactly (pure algo is
// checked in package algo; this checks state keeping).
func TestReferenceExperiment(t *testing.T) {
	want := map[string][]int{
		"edge":   {20, 10, 11, 10, 10},
		"steady": {60, 60, 60, 69, 69},
		"burst":  {10, 10, 10, 10, 10},
	}
	s := newStore(t, 0)
	for _, p := range algo.ReferencePatterns() {
		for i, l := range algo.ReferenceLimits() {
			k := fmt.Sprintf("rl:v2:{ip:192.0.2.7}:%s-%d", p.Name, i)
			acc := 0
			for _, at := range p.Times {
				if decide(t, s, at, store.Check{Key: k, Limit: l, Cost: 1})[0].Allowed {
					acc++
				}
			}
			if acc != want[p.Name][i] {
				t.Errorf("%s, %v: %d accepted, want %d", p.Name, l.Kind, acc, want[p.Name][i])
			}
		}
	}
}

// A refused second check leaves the first uncharged; the first reports its
// cost-0 peek.
func TestMultiCheckAtomic(t *testing.T) {
	s := newStore(t, 0)
	a := store.Check{Key: "rl:v2:{ip:a}:five", Limit: fixed5, Cost: 1}
	b := store.Check{Key: "rl:v2:{ip:a}:one", Limit: fixed1, Cost: 1}
	now := B + 1000
	reset := 3_600_000 - now%3_600_000 // B is not a whole number of hours
	steps := []struct {
		checks []store.Check
		want   []algo.Decision
	}{
		{[]store.Check{a, b}, []algo.Decision{
			{Allowed: true, Remaining: 4, ResetAfter: reset},
			{Allowed: true, Remaining: 0, ResetAfter: reset}}},
		{[]store.Check{a, b}, []algo.Decision{
			{Allowed: true, Remaining: 4, ResetAfter: reset}, // peek: not charged
			{Remaining: 0, RetryAfter: reset, ResetAfter: reset}}},
		{[]store.Check{a}, []algo.Decision{
			{Allowed: true, Remaining: 3, ResetAfter: reset}}},
		// The same key twice: the second sees the first's charge.
		{[]store.Check{a, a}, []algo.Decision{
			{Allowed: true, Remaining: 2, ResetAfter: reset},
			{Allowed: true, Remaining: 1, ResetAfter: reset}}},
		{[]store.Check{a, a}, []algo.Decision{ // second refused: none charged
			{Allowed: true, Remaining: 1, ResetAfter: reset},
			{Remaining: 0, RetryAfter: reset, ResetAfter: reset}}},
		{[]store.Check{a}, []algo.Decision{
			{Allowed: true, Remaining: 0, ResetAfter: reset}}},
	}
	for i, st := range steps {
		if got := decide(t, s, now, st.checks...); !slices.Equal(got, st.want) {
			t.Fatalf("step %d: got %+v, want %+v", i, got, st.want)
		}
	}
}

// More checks than fit on the stack, across shards, all or nothing.
func TestManyChecks(t *testing.T) {
	s := newStore(t, 0)
	var checks []store.Check
	for i := range 7 {
		checks = append(checks, store.Check{Key: fmt.Sprintf("k%d", i), Limit: fixed1, Cost: 1})
	}
	decide(t, s, B, checks[6])
	for i, d := range decide(t, s, B, checks...) {
		if d.Allowed != (i < 6) || d.Remaining != 1 && i < 6 {
			t.Fatalf("check %d: %+v", i, d)
		}
	}
	for i, d := range decide(t, s, B, checks[:6]...) {
		if !d.Allowed || d.Remaining != 0 {
			t.Fatalf("check %d after the refusal: %+v, want charged now", i, d)
		}
	}
}

func TestLRUEviction(t *testing.T) {
	s := newStore(t, 3)
	check := func(k string) store.Check { return store.Check{Key: k, Limit: token10, Cost: 1} }
	for _, k := range []string{"k1", "k2", "k3"} {
		decide(t, s, B, check(k))
	}
	decide(t, s, B, check("k1")) // k1 used again: k2 is the least recent
	decide(t, s, B, check("k4"))
	if s.Len() != 3 || s.Evictions() != 1 {
		t.Fatalf("Len %d Evictions %d, want 3 and 1", s.Len(), s.Evictions())
	}
	// k2 last: its insertion evicts again.
	for _, c := range []struct {
		k         string
		remaining int64
	}{{"k1", 7}, {"k3", 8}, {"k4", 8}, {"k2", 9}} {
		if d := decide(t, s, B, check(c.k))[0]; d.Remaining != c.remaining {
			t.Errorf("%s: remaining %d, want %d (k2 evicted, so full again)", c.k, d.Remaining, c.remaining)
		}
	}
	// A refused request and a peek add no key.
	n := s.Len()
	decide(t, s, B, store.Check{Key: "peek", Limit: token10})
	decide(t, s, B, store.Check{Key: "big", Limit: token10, Cost: 11})
	if s.Len() != n {
		t.Fatalf("Len %d after a peek and a refusal, want %d", s.Len(), n)
	}
}

// Random traffic on many keys of every kind: the store, sweeping and
// expiring as it goes, decides exactly as algo on states that are never
// dropped.
func TestIdleExpiryNeverChangesADecision(t *testing.T) {
	s := newStore(t, 0)
	limits := append(algo.ReferenceLimits(),
		algo.Limit{Kind: algo.LeakyBucket, Count: 3, Period: 1000, Burst: 2, Delay: 1},
		algo.Limit{Kind: algo.SlidingWindow, Count: 3, Period: 700},
		algo.Limit{Kind: algo.Concurrency, Count: 2, Period: 900},
	)
	ref := map[string]*algo.State{}
	rng := rand.New(rand.NewPCG(3, 4))
	now := B
	swept := 0
	for i := range 50_000 {
		now += rng.Int64N(40)
		li := rng.IntN(len(limits))
		l := limits[li]
		k := fmt.Sprintf("k%d:%d", rng.IntN(20), li)
		c := store.Check{Key: k, Limit: l, Cost: rng.Int64N(3), Lease: fmt.Sprint(rng.IntN(4))}
		if ref[k] == nil {
			ref[k] = &algo.State{}
		}
		if l.Kind == algo.Concurrency && rng.IntN(3) == 0 {
			if err := s.Release(context.Background(), []store.Check{c}); err != nil {
				t.Fatal(err)
			}
			ref[k].Release(c.Lease, now)
			continue
		}
		want := l.DecideLease(ref[k], now, c.Cost, c.Lease)
		if got := decide(t, s, now, c)[0]; got != want {
			t.Fatalf("request %d (%s, %v, cost %d, t=%d): store %+v, algo %+v", i, k, &l, c.Cost, now-B, got, want)
		}
		if i%500 == 0 {
			swept += s.Sweep(now)
		}
	}
	if swept == 0 {
		t.Fatal("Sweep never dropped an idle key: the test proves nothing")
	}
	if s.Len() > len(ref) {
		t.Fatalf("Len %d > %d keys used", s.Len(), len(ref))
	}
	if n := s.Sweep(now + 3_600_000); n == 0 || s.Len() != 0 {
		t.Fatalf("an hour later Sweep dropped %d, Len %d, want all", n, s.Len())
	}
}

func TestConcurrencyLeases(t *testing.T) {
	s := newStore(t, 0)
	l := algo.Limit{Kind: algo.Concurrency, Count: 2, Period: 30_000}
	lease := func(id string) store.Check {
		return store.Check{Key: "rl:v2:{ip:a}:conc", Limit: l, Cost: 1, Lease: id}
	}
	ctx := context.Background()
	steps := []struct {
		at      int64
		release string
		lease   string
		want    algo.Decision
	}{
		{0, "", "a", algo.Decision{Allowed: true, Remaining: 1, ResetAfter: 30_000}},
		{10, "", "b", algo.Decision{Allowed: true, Remaining: 0, ResetAfter: 30_000}},
		{20, "", "c", algo.Decision{Remaining: 0, RetryAfter: 29_980, ResetAfter: 29_990}},
		{30, "a", "c", algo.Decision{Allowed: true, Remaining: 0, ResetAfter: 30_000}},
		{40, "x", "d", algo.Decision{Remaining: 0, RetryAfter: 29_970, ResetAfter: 29_990}}, // unknown lease
	}
	for i, st := range steps {
		if st.release != "" {
			if err := s.Release(ctx, []store.Check{lease(st.release), {Key: "other", Limit: fixed1}}); err != nil {
				t.Fatal(err)
			}
		}
		if got := decide(t, s, B+st.at, lease(st.lease))[0]; got != st.want {
			t.Fatalf("step %d: got %+v, want %+v", i, got, st.want)
		}
	}
	s.Release(ctx, []store.Check{lease("b"), lease("c")})
	if s.Len() != 0 {
		t.Fatalf("Len %d after releasing every lease, want 0", s.Len())
	}
}

// The same key under another algorithm (reload changed it) starts idle.
func TestKindChangeStartsIdle(t *testing.T) {
	s := newStore(t, 0)
	k := "rl:v2:{ip:a}:p"
	decide(t, s, B, store.Check{Key: k, Limit: token10, Cost: 10})
	log := algo.Limit{Kind: algo.SlidingLog, Count: 3, Period: 1000}
	if d := decide(t, s, B, store.Check{Key: k, Limit: log, Cost: 1})[0]; !d.Allowed || d.Remaining != 2 {
		t.Fatalf("sliding log after token bucket: %+v", d)
	}
	if d := decide(t, s, B, store.Check{Key: k, Limit: token10, Cost: 1})[0]; !d.Allowed || d.Remaining != 9 {
		t.Fatalf("token bucket after sliding log: %+v", d)
	}
}

// 500 goroutines on one key at one instant admit exactly the limit, for
// every kind.
func TestRaceExactLimit(t *testing.T) {
	hour := int64(3_600_000)
	limits := []algo.Limit{
		{Kind: algo.FixedWindow, Count: 10, Period: hour},
		{Kind: algo.SlidingLog, Count: 10, Period: hour},
		{Kind: algo.SlidingWindow, Count: 10, Period: hour},
		{Kind: algo.TokenBucket, Count: 10, Period: hour, Burst: 10},
		{Kind: algo.LeakyBucket, Count: 10, Period: hour, Burst: 9, NoDelay: true},
		{Kind: algo.Concurrency, Count: 10, Period: hour},
	}
	s := New(Options{SweepInterval: time.Millisecond}) // real clock, sweeper running
	defer s.Close()
	for _, l := range limits {
		var allowed atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range 500 {
			wg.Go(func() {
				<-start
				c := []store.Check{{Key: "rl:v2:{ip:race}:" + l.Kind.String(), Limit: l, Cost: 1, Lease: fmt.Sprint(g)}}
				out := make([]algo.Decision, 1)
				if _, err := s.Decide(context.Background(), c, 0, out); err != nil {
					t.Error(err)
				}
				if out[0].Allowed {
					allowed.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if n := allowed.Load(); n != 10 {
			t.Errorf("%v: %d of 500 allowed, want 10", &l, n)
		}
	}
}

func TestClock(t *testing.T) {
	s := New(Options{SweepInterval: -1})
	defer s.Close()
	if d := s.Now() - time.Now().UnixMilli(); d < -100 || d > 100 {
		t.Fatalf("default clock %d ms off the wall clock", d)
	}
	now := int64(B)
	s = New(Options{Clock: func() int64 { return now }, SweepInterval: -1})
	defer s.Close()
	out := make([]algo.Decision, 1)
	c := []store.Check{{Key: "k", Limit: fixed1, Cost: 1}}
	if used, _ := s.Decide(context.Background(), c, 0, out); used != B {
		t.Fatalf("now=0 used %d, want the injected clock %d", used, B)
	}
	if used, _ := s.Decide(context.Background(), c, B+5, out); used != B+5 || out[0].Allowed {
		t.Fatalf("now given: used %d, %+v; want %d, refused", used, out[0], B+5)
	}
	if _, err := s.Decide(context.Background(), c, 0, nil); err == nil {
		t.Fatal("Decide with a short out: no error")
	}
}

// The shard index stays consistent through growth and deletion: a model
// of present keys matches lookups after random inserts and removals.
func TestShardIndex(t *testing.T) {
	var sh shard
	sh.init(new(atomic.Int64))
	rng := rand.New(rand.NewPCG(5, 6))
	model := map[key]bool{}
	keys := make([]key, 3000)
	for i := range keys {
		keys[i] = key{rng.Uint64(), rng.Uint64() & 0xfff} // low bits collide a lot
	}
	for range 100_000 {
		k := keys[rng.IntN(len(keys))]
		slot, idx := sh.find(k)
		if (idx != 0) != model[k] {
			t.Fatalf("key %v: found %v, model %v", k, idx != 0, model[k])
		}
		if idx == 0 {
			sh.insert(slot, k)
			model[k] = true
		} else {
			sh.remove(idx)
			delete(model, k)
		}
	}
	if sh.n != len(model) {
		t.Fatalf("n %d, model %d", sh.n, len(model))
	}
	got := map[key]bool{}
	for idx := sh.at(0).next; idx != 0; idx = sh.at(idx).next {
		got[sh.at(idx).k] = true
	}
	if !reflect.DeepEqual(got, model) {
		t.Fatalf("LRU list holds %d keys, model %d", len(got), len(model))
	}
}
