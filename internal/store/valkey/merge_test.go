package valkey

// Tests of merged runs (Store.send merges identical calls of a batch into
// one script run, lua/dispatch.lua ARGV[3] = n): a merged run must leave
// the same decisions, stored values, sorted sets and key TTLs as the same
// number of serial runs at the same now.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/testutil/rediscluster"
	"rlproxy/internal/testutil/waitfor"
)

// mergeHold makes every batch leader of st wait until its batch holds n
// calls (set); n <= 0 lets leaders send at once. It counts one batch in
// flight for the whole test so that every leader collects.
type mergeHold struct {
	t  *testing.T
	st *Store
}

func newMergeHold(t *testing.T, st *Store) *mergeHold {
	holdInflight(t, st)
	h := &mergeHold{t: t, st: st}
	h.set(0)
	return h
}

func (h *mergeHold) set(n int) {
	if n <= 0 {
		h.st.batch.yield = func() {}
		return
	}
	h.st.batch.yield = func() { waitBatch(h.t, h.st, n) }
}

// keyState describes key's stored state: type, value or members with
// scores, and PTTL.
func keyState(t *testing.T, c valkeygo.Client, key string) (string, int64) {
	t.Helper()
	ctx := context.Background()
	typ, err := c.Do(ctx, c.B().Type().Key(key).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	pttl, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	switch typ {
	case "string":
		v, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		return "string " + hex.EncodeToString([]byte(v)), pttl
	case "zset":
		v, err := c.Do(ctx, c.B().Zrange().Key(key).Min("0").Max("-1").Withscores().Build()).ToAny()
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint("zset ", v), pttl
	}
	return typ, pttl
}

// mergeLimits are TestMergeRandom's limits. Their periods are long (100 s
// and more) because decisions use an injected now while Valkey expires
// keys in real time: with 1 s periods a key of the serial set could
// expire (its TTL a few hundred ms) while a loaded machine took that long
// to reach the merged run, and the two sets then decided differently.
var mergeLimits = []algo.Limit{
	{Kind: algo.FixedWindow, Count: 5, Period: 1_000_000},
	{Kind: algo.FixedWindow, Count: 2, Period: 100_000},
	{Kind: algo.SlidingLog, Count: 4, Period: 500_000},
	{Kind: algo.SlidingLog, Count: 2, Period: 100_000},
	{Kind: algo.SlidingWindow, Count: 6, Period: 1_000_000},
	{Kind: algo.SlidingWindow, Count: 3, Period: 100_000},
	{Kind: algo.TokenBucket, Count: 2, Period: 100_000, Burst: 3},
	{Kind: algo.TokenBucket, Count: 10, Period: 100_000, Burst: 5},
	{Kind: algo.LeakyBucket, Count: 2, Period: 100_000, Burst: 3, Delay: 1},
	{Kind: algo.LeakyBucket, Count: 5, Period: 100_000, Burst: 4, NoDelay: true},
	{Kind: algo.LeakyBucket, Count: 5, Period: 100_000, Burst: 6, Delay: 2},
	{Kind: algo.Concurrency, Count: 3, Period: 500_000},
}

// TestMergeRandom: random routes of 1 to 4 checks (every algorithm,
// costs 0 to quota+1, a shared lease id on concurrency checks) with random
// histories: n identical calls in one batch (one merged run) must leave the
// same decisions, values, sorted sets and TTLs as n serial calls at the
// same now, and decide the same afterwards.
func TestMergeRandom(t *testing.T) {
	st, srv := newStore(t)
	c := srv.Client(t)
	h := newMergeHold(t, st)
	const iters, maxN = 300, 20
	rng := rand.New(rand.NewPCG(7, 8))
	ctx := context.Background()
	decide := func(cks []store.Check, now int64) string {
		out := make([]algo.Decision, len(cks))
		if _, err := st.Decide(ctx, cks, now, out); err != nil {
			t.Fatalf("Decide: %v", err)
		}
		return fmt.Sprint(out)
	}
	for it := range iters {
		k := 1 + rng.IntN(4)
		perm := rng.Perm(len(mergeLimits))[:k]
		mk := func(set string) []store.Check {
			cks := make([]store.Check, k)
			for i, p := range perm {
				cks[i] = store.Check{Key: fmt.Sprintf("rl:v2:{r%d%s}:%d", it, set, i), Limit: mergeLimits[p]}
			}
			return cks
		}
		m, s := mk("m"), mk("s")
		now := base + 10_000_000 + int64(it)*10_000_000
		// History: the same random decisions on both sets.
		histStart := time.Now()
		for j := 0; j < rng.IntN(8); j++ {
			at := now - rng.Int64N(600_000)
			for i := range m {
				l := m[i].Limit
				cost := int64(rng.IntN(3))
				m[i].Cost, s[i].Cost = cost, cost
				m[i].Lease, s[i].Lease = "", ""
				if l.Kind == algo.Concurrency {
					m[i].Lease = fmt.Sprint("h", rng.IntN(4))
					s[i].Lease = m[i].Lease
				}
			}
			if a, b := decide(m, at), decide(s, at); a != b {
				t.Fatalf("iter %d: history differs: %s vs %s", it, a, b)
			}
		}
		// The request: one cost (sometimes above a quota), one lease.
		for i := range m {
			l := m[i].Limit
			cost := int64(1)
			switch x := rng.IntN(10); {
			case x == 0:
				cost = 0
			case x < 3:
				cost = 2
			case x == 3:
				cost = l.Quota() + 1
			}
			m[i].Cost, s[i].Cost = cost, cost
			m[i].Lease, s[i].Lease = "", ""
			if l.Kind == algo.Concurrency {
				m[i].Lease, s[i].Lease = "same", "same"
			}
		}
		n := 2 + rng.IntN(maxN-1)
		var serial []string
		for range n {
			serial = append(serial, decide(s, now))
		}
		serialEnd := time.Now()
		h.set(n)
		before := evalshaCalls(t, srv)
		var wg sync.WaitGroup
		results := goCollect(&wg, n, func() string { return decide(m, now) })
		wg.Wait()
		merged := results()
		mergedEnd := time.Now()
		h.set(0)
		if runs := evalshaCalls(t, srv) - before; runs != int64((n+maxMerge-1)/maxMerge) {
			t.Errorf("iter %d: %d runs for %d identical calls, want 1", it, runs, n)
		}
		slices.Sort(serial)
		slices.Sort(merged)
		if !slices.Equal(serial, merged) {
			t.Errorf("iter %d (%v): merged\n%v\nserial\n%v", it, m, merged, serial)
		}
		for i := range m {
			rm := time.Now()
			vm, tm := keyState(t, c, m[i].Key)
			vs, ts := keyState(t, c, s[i].Key)
			rs := time.Now()
			w := ttlWindow{histStart: histStart, serialEnd: serialEnd, mergedEnd: mergedEnd, readStart: rm, readEnd: rs}
			if vm != vs || (tm < 0) != (ts < 0) || (tm >= 0 && !w.same(tm, ts)) {
				t.Errorf("iter %d check %d (%+v): state merged %s pttl %d, serial %s pttl %d (%s)", it, i, m[i].Limit, vm, tm, vs, ts, w)
			}
		}
		for _, later := range []int64{0, 1, 70_000, 300_000} {
			if a, b := decide(m, now+later), decide(s, now+later); a != b {
				t.Errorf("iter %d at now+%d: merged %s, serial %s", it, later, a, b)
			}
		}
	}
}

// ttlWindow holds the real instants that bound when a TestMergeRandom
// key's TTL was set and read. Decisions use an injected now, but Valkey
// counts PTTL down in real time from each write, so the two sets' PTTLs
// differ by how much longer ago one was written than the other: a fixed
// tolerance fails on a loaded machine (it once saw 1998 against 1894).
// Both sets were last written between histStart (a key charged only in the
// history) and the end of their own phase, and read between readStart and
// readEnd.
type ttlWindow struct {
	histStart, serialEnd, mergedEnd, readStart, readEnd time.Time
}

// same reports whether merged and serial PTTLs (ms, >= 0) can be one TTL
// set at some instant of each set's write window and read in the read
// window: the TTLs they started from, PTTL + (read - write), must have
// ranges that overlap. One ms each side covers PTTL's and PX's rounding.
func (w ttlWindow) same(merged, serial int64) bool {
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	// Ranges of the initial TTL: [pttl + min age, pttl + max age].
	mLo, mHi := merged+ms(w.readStart.Sub(w.mergedEnd)), merged+ms(w.readEnd.Sub(w.histStart))
	sLo, sHi := serial+ms(w.readStart.Sub(w.serialEnd)), serial+ms(w.readEnd.Sub(w.histStart))
	return mLo <= sHi+1 && sLo <= mHi+1
}

func (w ttlWindow) String() string {
	return fmt.Sprintf("history to serial end %v, to merged end %v, reads %v after merged end over %v",
		w.serialEnd.Sub(w.histStart), w.mergedEnd.Sub(w.histStart), w.readStart.Sub(w.mergedEnd), w.readEnd.Sub(w.readStart))
}

// TestMergeMaxMerge: 300 identical calls in one batch are 128 + 128 +
// 44 runs, and each of the 300 remaining counts is handed out exactly once.
func TestMergeMaxMerge(t *testing.T) {
	st, srv := newStore(t)
	h := newMergeHold(t, st)
	l := algo.Limit{Kind: algo.FixedWindow, Count: 1000, Period: 3_600_000}
	cks := []store.Check{{Key: "rl:v2:{max}:fw", Limit: l, Cost: 1}}
	const n = 300
	decide1(t, st, "rl:v2:{warm}:fw", l, 1, "", base)
	h.set(n)
	before := evalshaCalls(t, srv)
	got := make([]int64, 0, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			out := make([]algo.Decision, 1)
			if _, err := st.Decide(context.Background(), cks, base, out); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got = append(got, out[0].Remaining)
			mu.Unlock()
		})
	}
	wg.Wait()
	h.set(0)
	if runs := evalshaCalls(t, srv) - before; runs != 3 {
		t.Errorf("%d runs for %d identical calls, want 3", runs, n)
	}
	slices.Sort(got)
	for i, r := range got {
		if want := int64(1000 - n + i); r != want {
			t.Fatalf("remaining values %v..., want %d..999 once each", got[:min(len(got), 10)], 1000-n)
		}
	}
}

// TestMergeNoScript: after SCRIPT FLUSH, merged runs (several of them
// in one batch) are re-sent with their n: every call is answered once and
// every key charged exactly as many times as it had calls.
func TestMergeNoScript(t *testing.T) {
	st, srv := newStore(t)
	h := newMergeHold(t, st)
	l := algo.Limit{Kind: algo.TokenBucket, Count: 1, Period: 3_600_000, Burst: 100}
	decide1(t, st, "rl:v2:{warm}:tb", l, 1, "", base)
	if err := srv.Do(t, "SCRIPT", "FLUSH").Error(); err != nil {
		t.Fatal(err)
	}
	sizes := []int{7, 1, 5, 3}
	total := 0
	for _, s := range sizes {
		total += s
	}
	h.set(total)
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[int][]int64{}
	for k, s := range sizes {
		for range s {
			wg.Go(func() {
				out := make([]algo.Decision, 1)
				cks := []store.Check{{Key: fmt.Sprintf("rl:v2:{ns%d}:tb", k), Limit: l, Cost: 1}}
				if _, err := st.Decide(context.Background(), cks, base, out); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got[k] = append(got[k], out[0].Remaining)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	h.set(0)
	for k, s := range sizes {
		slices.Sort(got[k])
		for i, r := range got[k] {
			if want := int64(100 - s + i); r != want {
				t.Errorf("key %d: remaining %v, want %d..99", k, got[k], 100-s)
				break
			}
		}
		if d := decide1(t, st, fmt.Sprintf("rl:v2:{ns%d}:tb", k), l, 0, "", base); d.Remaining != int64(100-s) {
			t.Errorf("key %d: charged %d times, want %d", k, 100-d.Remaining, s)
		}
	}
}

// joinInOrder starts fns one at a time, each only once the previous
// one has joined the held batch, so that the batch holds them in order.
func joinInOrder(t *testing.T, h *mergeHold, fns []func()) {
	h.set(len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(fn)
		if i == len(fns)-1 {
			break // the batch is sent as soon as the last one joins
		}
		waitfor.True(t, fmt.Sprintf("call %d joined", i), func() bool { return batchLen(h.st) >= i+1 })
	}
	wg.Wait()
	h.set(0)
}

// TestMergeInterleaved: calls on one first key with two argument
// lists X (cost 1) and Y (cost 2) joining as X Y X X Y decide exactly as
// the same calls in that order (runs X, Y, XX, Y: newest keeps the order).
func TestMergeInterleaved(t *testing.T) {
	st, srv := newStore(t)
	h := newMergeHold(t, st)
	l := algo.Limit{Kind: algo.FixedWindow, Count: 6, Period: 3_600_000}
	costs := []int64{1, 2, 1, 1, 2}
	var want []string
	for _, c := range costs {
		want = append(want, fmt.Sprint(decide1(t, st, "rl:v2:{ilv-s}:fw", l, c, "", base)))
	}
	got := make([]string, len(costs))
	var fns []func()
	for i, c := range costs {
		fns = append(fns, func() {
			out := make([]algo.Decision, 1)
			if _, err := st.Decide(context.Background(), []store.Check{{Key: "rl:v2:{ilv-m}:fw", Limit: l, Cost: c}}, base, out); err != nil {
				t.Error(err)
			}
			got[i] = fmt.Sprint(out[0])
		})
	}
	before := evalshaCalls(t, srv)
	joinInOrder(t, h, fns)
	if runs := evalshaCalls(t, srv) - before; runs != 4 {
		t.Errorf("%d runs, want 4 (X, Y, XX, Y)", runs)
	}
	if !slices.Equal(got, want) {
		t.Errorf("in join order: merged %v, serial %v", got, want)
	}
}

// TestMergeHeadCancelled: the first of several identical calls (the
// batch's leader) has its context cancelled before the send: it gets its
// context's error and is not charged; the other calls are one run of n-1.
func TestMergeHeadCancelled(t *testing.T) {
	st, srv := newStore(t)
	h := newMergeHold(t, st)
	l := algo.Limit{Kind: algo.FixedWindow, Count: 10, Period: 3_600_000}
	cks := []store.Check{{Key: "rl:v2:{hc}:fw", Limit: l, Cost: 1}}
	decide1(t, st, "rl:v2:{warm}:fw", l, 1, "", base)
	const n = 6
	lctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var rem []int64
	var fns []func()
	for i := range n {
		fns = append(fns, func() {
			ctx := context.Background()
			if i == 0 {
				ctx = lctx
			}
			out := make([]algo.Decision, 1)
			_, err := st.Decide(ctx, cks, base, out)
			if i == 0 {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("cancelled head: %v, want context.Canceled", err)
				}
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			rem = append(rem, out[0].Remaining)
			mu.Unlock()
		})
	}
	before := evalshaCalls(t, srv)
	h.st.batch.yield = nil
	// Hold until all joined, then cancel the leader before the send.
	h.set(n)
	hold := h.st.batch.yield
	h.st.batch.yield = func() { hold(); cancel() }
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(fn)
		if i < n-1 {
			waitfor.True(t, fmt.Sprintf("call %d joined", i), func() bool { return batchLen(h.st) >= i+1 })
		}
	}
	wg.Wait()
	h.set(0)
	if runs := evalshaCalls(t, srv) - before; runs != 1 {
		t.Errorf("%d runs, want 1", runs)
	}
	slices.Sort(rem)
	if fmt.Sprint(rem) != "[5 6 7 8 9]" {
		t.Errorf("remaining %v, want [5 6 7 8 9]", rem)
	}
	if d := decide1(t, st, "rl:v2:{hc}:fw", l, 0, "", base); d.Remaining != 5 {
		t.Errorf("charged %d times, want 5", 10-d.Remaining)
	}
}

// TestMergeCluster: on a 3-master cluster, after SCRIPT FLUSH on
// every node, one batch holds several clients' identical calls (their keys
// on different nodes, one slot each, two checks): every client's n calls
// get remaining 49..50-n once each, and each key is charged exactly n times.
func TestMergeCluster(t *testing.T) {
	cl := rediscluster.Start(t, 3)
	st := openStore(t, cl.Addrs)
	h := newMergeHold(t, st)
	l := algo.Limit{Kind: algo.TokenBucket, Count: 1, Period: 3_600_000, Burst: 50}
	fw := algo.Limit{Kind: algo.FixedWindow, Count: 50, Period: 3_600_000}
	checks := func(k int) []store.Check {
		return []store.Check{
			{Key: fmt.Sprintf("rl:v2:{cl%d}:tb", k), Limit: l, Cost: 1},
			{Key: fmt.Sprintf("rl:v2:{cl%d}:fw", k), Limit: fw, Cost: 1},
		}
	}
	out := make([]algo.Decision, 2)
	if _, err := st.Decide(context.Background(), checks(99), base, out); err != nil {
		t.Fatal(err)
	}
	c := cl.Client(t)
	for _, n := range c.Nodes() {
		if err := n.Do(context.Background(), n.B().ScriptFlush().Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	sizes := []int{9, 1, 4, 7, 2, 5}
	total := 0
	for _, s := range sizes {
		total += s
	}
	h.set(total)
	var mu sync.Mutex
	got := map[int][]string{}
	var wg sync.WaitGroup
	for k, s := range sizes {
		for range s {
			wg.Go(func() {
				out := make([]algo.Decision, 2)
				if _, err := st.Decide(context.Background(), checks(k), base, out); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got[k] = append(got[k], fmt.Sprint(out[0].Remaining, out[1].Remaining))
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	h.set(0)
	for k, s := range sizes {
		var want []string
		for i := range s {
			want = append(want, fmt.Sprint(49-i, 49-i))
		}
		slices.Sort(want)
		slices.Sort(got[k])
		if !slices.Equal(got[k], want) {
			t.Errorf("client %d: %v, want %v", k, got[k], want)
		}
		if _, err := st.Decide(context.Background(), checks(k), base, out); err != nil {
			t.Fatal(err)
		}
		if out[0].Remaining != int64(49-s) || out[1].Remaining != int64(49-s) {
			t.Errorf("client %d after %d calls: %+v, want remaining %d", k, s, out, 49-s)
		}
	}
}

// TestMergeReadsOnce: a merged run of n refused decisions on one fixed
// window key (a client over its limit: the attacker case) reads the key
// once, not once per request (lua/prelude.lua caches what it reads too).
func TestMergeReadsOnce(t *testing.T) {
	st, srv := newStore(t)
	h := newMergeHold(t, st)
	l := algo.Limit{Kind: algo.FixedWindow, Count: 1, Period: 3_600_000}
	cks := []store.Check{{Key: "rl:v2:{ro}:fw", Limit: l, Cost: 1}}
	decide1(t, st, "rl:v2:{ro}:fw", l, 1, "", base) // now over the limit
	const n = 20
	h.set(n)
	before, runs := cmdCalls(t, srv, "get"), evalshaCalls(t, srv)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			out := make([]algo.Decision, 1)
			if _, err := st.Decide(context.Background(), cks, base, out); err != nil || out[0].Allowed {
				t.Errorf("%+v, %v; want refused", out[0], err)
			}
		})
	}
	wg.Wait()
	h.set(0)
	gets := cmdCalls(t, srv, "get") - before
	if r := evalshaCalls(t, srv) - runs; r != 1 {
		t.Errorf("%d script runs for %d identical refusals, want 1", r, n)
	}
	if gets != 1 {
		t.Errorf("%d GETs of one key in one merged run of %d, want 1 (DESIGN.md: read once)", gets, n)
	}
}

// TestDecideSharedKey: two checks on one key (which the configuration
// cannot produce) are an error that sends nothing: the script decides each
// check from its key's state before the decision.
func TestDecideSharedKey(t *testing.T) {
	st, srv := newStore(t)
	sl := algo.Limit{Kind: algo.SlidingLog, Count: 10, Period: 60_000}
	fw := algo.Limit{Kind: algo.FixedWindow, Count: 10, Period: 60_000}
	cks := []store.Check{{Key: "rl:v2:{sh}:x", Limit: fw, Cost: 1}, {Key: "rl:v2:{sh}:x", Limit: sl, Cost: 1}}
	before := evalshaCalls(t, srv)
	out := make([]algo.Decision, 2)
	if _, err := st.Decide(context.Background(), cks, base, out); err == nil || !strings.Contains(err.Error(), `share key "rl:v2:{sh}:x"`) {
		t.Errorf("Decide: %v, want an error naming the shared key", err)
	}
	if runs := evalshaCalls(t, srv) - before; runs != 0 {
		t.Errorf("%d script runs, want none", runs)
	}
	if v, p := keyState(t, srv.Client(t), "rl:v2:{sh}:x"); v != "none" {
		t.Errorf("key holds %s (pttl %d), want none", v, p)
	}
}
