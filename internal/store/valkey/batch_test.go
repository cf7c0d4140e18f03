package valkey

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/testutil/redisserver"
	"rlproxy/internal/testutil/waitfor"
)

// holdInflight counts one batch of st as in flight until t ends, so that
// every leader collects (and yields) instead of sending at once.
func holdInflight(t *testing.T, st *Store) {
	st.batch.mu.Lock()
	st.batch.inflight++
	st.batch.mu.Unlock()
	t.Cleanup(func() {
		st.batch.mu.Lock()
		st.batch.inflight--
		st.batch.mu.Unlock()
	})
}

// batchLen is how many calls st's collecting batch holds (0 for none).
func batchLen(st *Store) int {
	st.batch.mu.Lock()
	defer st.batch.mu.Unlock()
	if st.batch.collect == nil {
		return 0
	}
	return len(st.batch.collect.calls)
}

// waitBatch waits until st's collecting batch holds n calls, failing t
// after 10 s.
func waitBatch(t *testing.T, st *Store, n int) {
	if !waitfor.Poll(10*time.Second, func() bool { return batchLen(st) >= n }) {
		t.Errorf("batch holds %d calls after 10 s, want %d to join", batchLen(st), n)
	}
}

// holdBatches makes st's batch leaders wait, instead of yielding, until
// their batch holds n calls (waitBatch), then run then (may be nil) before
// sending; every leader collects (holdInflight). It returns the number of
// batches held.
func holdBatches(t *testing.T, st *Store, n int, then func()) *atomic.Int64 {
	var sent atomic.Int64
	holdInflight(t, st)
	st.batch.yield = func() {
		waitBatch(t, st, n)
		if then != nil {
			then()
		}
		sent.Add(1)
	}
	return &sent
}

// TestBatchReplies: 64 concurrent decisions go out as one batch, and each
// caller gets the reply to its own check (its own key and count), round
// after round.
func TestBatchReplies(t *testing.T) {
	st, _ := newStore(t)
	const callers, rounds = 64, 3
	sent := holdBatches(t, st, callers, nil)
	for r := range rounds {
		var wg sync.WaitGroup
		for g := range callers {
			wg.Go(func() {
				l := algo.Limit{Kind: algo.FixedWindow, Count: int64(100 + g), Period: 3_600_000}
				out := make([]algo.Decision, 1)
				c := []store.Check{{Key: fmt.Sprintf("rl:v2:{batch%d}:fw", g), Limit: l, Cost: 1}}
				if _, err := st.Decide(context.Background(), c, base, out); err != nil {
					t.Errorf("round %d caller %d: %v", r, g, err)
					return
				}
				if want := int64(100 + g - r - 1); !out[0].Allowed || out[0].Remaining != want {
					t.Errorf("round %d caller %d: %+v, want allowed with remaining %d", r, g, out[0], want)
				}
			})
		}
		wg.Wait()
	}
	if n := sent.Load(); n != rounds {
		t.Errorf("%d batches for %d rounds of %d callers, want one per round", n, rounds, callers)
	}
}

// TestBatchCallerLeaves: callers whose context ends while their batch is
// held get their context's error at once and are left out of the batch
// (nothing charged: an error means no decision), and the batch still
// answers the caller that stayed — also when the one whose context ended
// is the batch's leader.
func TestBatchCallerLeaves(t *testing.T) {
	st, _ := newStore(t)
	l := algo.Limit{Kind: algo.FixedWindow, Count: 10, Period: 3_600_000}
	leaderCtx, cancelLeader := context.WithCancel(context.Background())
	leaverCtx, cancelLeaver := context.WithCancel(context.Background())
	left := make(chan error)
	holdBatches(t, st, 3, func() {
		cancelLeader()
		cancelLeaver()
		select {
		case err := <-left:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("caller that left: %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("caller that left still waits 5 s after its context ended")
		}
	})
	decide := func(ctx context.Context, key string) (algo.Decision, error) {
		out := make([]algo.Decision, 1)
		_, err := st.Decide(ctx, []store.Check{{Key: key, Limit: l, Cost: 1}}, base, out)
		return out[0], err
	}
	var wg sync.WaitGroup
	wg.Go(func() { // the leader: first in
		if _, err := decide(leaderCtx, "rl:v2:{leader}:fw"); !errors.Is(err, context.Canceled) {
			t.Errorf("leader whose context ended before the send: %v, want context.Canceled", err)
		}
	})
	waitfor.True(t, "the leader's batch open", st.batchOpen)
	wg.Go(func() {
		if d, err := decide(context.Background(), "rl:v2:{stayer}:fw"); err != nil || d.Remaining != 9 {
			t.Errorf("caller that stayed: %+v, %v; want remaining 9", d, err)
		}
	})
	go func() {
		_, err := decide(leaverCtx, "rl:v2:{leaver}:fw")
		left <- err
	}()
	wg.Wait()
	st.batch.yield = nil
	for _, who := range []string{"leader", "leaver"} {
		if d := decide1(t, st, "rl:v2:{"+who+"}:fw", l, 0, "", base); d.Remaining != 10 {
			t.Errorf("%s's check: remaining %d, want 10 (not sent)", who, d.Remaining)
		}
	}
	// A context that has already ended sends nothing either.
	if _, err := decide(leaderCtx, "rl:v2:{late}:fw"); !errors.Is(err, context.Canceled) {
		t.Errorf("Decide with an ended context: %v, want context.Canceled", err)
	}
	if d := decide1(t, st, "rl:v2:{late}:fw", l, 0, "", base); d.Remaining != 10 {
		t.Errorf("check decided with an ended context: remaining %d, want 10", d.Remaining)
	}
}

// batchOpen reports whether a batch is collecting.
func (s *Store) batchOpen() bool {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return s.batch.collect != nil
}

// TestBatchNoScript: after SCRIPT FLUSH a batch's EVALSHAs find no script;
// each is run again (EVAL), none is lost and none runs twice.
func TestBatchNoScript(t *testing.T) {
	st, srv := newStore(t)
	const callers = 16
	l := algo.Limit{Kind: algo.FixedWindow, Count: 10, Period: 3_600_000}
	decide1(t, st, "rl:v2:{warm}:fw", l, 1, "", base) // the script is cached
	if err := srv.Do(t, "SCRIPT", "FLUSH").Error(); err != nil {
		t.Fatal(err)
	}
	holdBatches(t, st, callers, nil)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			out := make([]algo.Decision, 1)
			c := []store.Check{{Key: fmt.Sprintf("rl:v2:{ns%d}:fw", g), Limit: l, Cost: 1}}
			if _, err := st.Decide(context.Background(), c, base, out); err != nil || out[0].Remaining != 9 {
				t.Errorf("caller %d after SCRIPT FLUSH: %+v, %v; want remaining 9", g, out[0], err)
			}
		})
	}
	wg.Wait()
	st.batch.yield = nil
	for g := range callers {
		if d := decide1(t, st, fmt.Sprintf("rl:v2:{ns%d}:fw", g), l, 0, "", base); d.Remaining != 9 {
			t.Errorf("key %d charged %d times, want once", g, 10-d.Remaining)
		}
	}
}

// TestBatchTimeout: a batch sent to a server that does not answer (busy in
// DEBUG SLEEP 0.8) fails every caller in it with a deadline error after
// Options.Timeout (200 ms), not after the sleep.
func TestBatchTimeout(t *testing.T) {
	st, srv := newSleepyStore(t)
	const callers = 8
	l := algo.Limit{Kind: algo.FixedWindow, Count: 5, Period: 3_600_000}
	warmUp(t, st) // connected before the server sleeps
	var slept <-chan struct{}
	defer func() { <-slept }()
	holdBatches(t, st, callers, func() { slept = srv.DebugSleep(t, "0.8") })
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			out := make([]algo.Decision, 1)
			c := []store.Check{{Key: fmt.Sprintf("rl:v2:{slow%d}:fw", g), Limit: l, Cost: 1}}
			_, err := st.Decide(context.Background(), c, base, out)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("caller %d against a sleeping server: %v, want a deadline error", g, err)
			}
		})
	}
	begin := time.Now()
	wg.Wait()
	// The batch waits for its 8 callers and for the server to be inside its
	// 800 ms sleep, then times out 200 ms after it is sent.
	if el := time.Since(begin); el > 600*time.Millisecond {
		t.Errorf("the batch failed after %v, want about 300 ms", el)
	}
}

// TestBatchTimedOutQueued: a batch that times out while valkey-go still
// holds its commands unsent (the server paused and a flood of large SETs
// fills the connection) must not have its commands overwritten by a later
// batch: once the server resumes, every check of the later batch is
// charged exactly once and the timed-out ones at most once. (Batches once
// shared a pooled command slice: valkey-go then sent the later batch twice,
// or read a cleared command and panicked.) Each step waits for the one
// before it: the server stays paused until the later batch is sent.
func TestBatchTimedOutQueued(t *testing.T) {
	srv := redisserver.Start(t)
	// The later batch has the whole Timeout, from its send, for the server
	// to resume, drain the flood and answer: on a loaded machine 0.5 s was
	// not always enough.
	st, err := New(context.Background(), Options{Addrs: []string{srv.Addr}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := st.Client(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	l := algo.Limit{Kind: algo.FixedWindow, Count: 10, Period: 3_600_000}
	decide1(t, st, "rl:v2:{warm}:fw", l, 1, "", base) // the script is cached

	begin := time.Now()
	var bg sync.WaitGroup
	defer bg.Wait()
	resume := srv.Pause(t)
	big := strings.Repeat("x", 4<<20)
	floodCtx, stopFlood := context.WithCancel(context.Background())
	defer stopFlood()
	for i := range 6 { // 24 MB: more than loopback's socket buffers hold
		bg.Go(func() { c.Do(floodCtx, c.B().Set().Key(fmt.Sprint("flood", i)).Value(big).Build()) })
	}
	waitBackedUp(t, srv.Addr)

	const callers = 4
	round := func(name string, want func(err error) bool) {
		var wg sync.WaitGroup
		for g := range callers {
			wg.Go(func() {
				out := make([]algo.Decision, 1)
				key := fmt.Sprintf("rl:v2:{%s%d}:fw", name, g)
				_, err := st.Decide(context.Background(), []store.Check{{Key: key, Limit: l, Cost: 1}}, base, out)
				if !want(err) {
					t.Errorf("%s caller %d at %v: %v", name, g, time.Since(begin).Round(time.Millisecond), err)
				}
			})
		}
		wg.Wait()
	}
	sent := holdBatches(t, st, callers, nil)
	// Queued behind the flood; times out with the server still paused.
	round("first", func(err error) bool { return errors.Is(err, context.DeadlineExceeded) })
	// Queued behind the timed-out batch; answered once the server resumes
	// and drains the flood.
	second := make(chan struct{})
	go func() {
		defer close(second)
		round("second", func(err error) bool { return err == nil })
	}()
	waitfor.True(t, "the second batch sent", func() bool { return sent.Load() == 2 })
	resume()
	<-second
	stopFlood()
	st.batch.yield = nil
	for g := range callers {
		if d := decide1(t, st, fmt.Sprintf("rl:v2:{second%d}:fw", g), l, 0, "", base); d.Remaining != 9 {
			t.Errorf("second batch's key %d charged %d times, want once", g, 10-d.Remaining)
		}
		if d := decide1(t, st, fmt.Sprintf("rl:v2:{first%d}:fw", g), l, 0, "", base); d.Remaining < 9 {
			t.Errorf("timed-out batch's key %d charged %d times, want at most once", g, 10-d.Remaining)
		}
	}
}

// waitBackedUp waits until an established connection to addr holds bytes
// its peer has not taken (/proc/net/tcp's tx_queue above 0): on loopback a
// receiver acknowledges at once while its window is open, so bytes left
// mean the sleeping server's receive buffer is full, and what is written
// after them stays queued in the client. It skips t without /proc/net/tcp.
func waitBackedUp(t *testing.T, addr string) {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skipf("no /proc/net/tcp to see the connection back up: %v", err)
	}
	peer := fmt.Sprintf(":%04X", p)
	waitfor.True(t, "bytes queued on a connection to "+addr, func() bool {
		b, err := os.ReadFile("/proc/net/tcp")
		if err != nil {
			return false
		}
		for _, l := range strings.Split(string(b), "\n") {
			// sl local_address rem_address st tx_queue:rx_queue ...; 01 is ESTABLISHED.
			f := strings.Fields(l)
			if len(f) < 5 || !strings.HasSuffix(f[2], peer) || f[3] != "01" {
				continue
			}
			tx, _, _ := strings.Cut(f[4], ":")
			if n, err := strconv.ParseUint(tx, 16, 64); err == nil && n > 0 {
				return true
			}
		}
		return false
	})
}

// TestBatchPanic: if sending a batch panics, every caller in it that was
// not answered yet gets an error instead of waiting forever, and the panic
// goes on in the leader. (A nil context stands in for a valkey-go panic.)
func TestBatchPanic(t *testing.T) {
	st, _ := newStore(t)
	l := algo.Limit{Kind: algo.FixedWindow, Count: 10, Period: 3_600_000}
	holdBatches(t, st, 2, func() { st.batch.collect.calls[1].ctx = nil })
	decide := func(key string) error {
		out := make([]algo.Decision, 1)
		_, err := st.Decide(context.Background(), []store.Check{{Key: key, Limit: l, Cost: 1}}, base, out)
		return err
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("leader: no panic, want the send's panic")
			}
		}()
		_ = decide("rl:v2:{panicleader}:fw")
	})
	waitfor.True(t, "the leader's batch open", st.batchOpen)
	errc := make(chan error, 1)
	go func() { errc <- decide("rl:v2:{panicjoiner}:fw") }()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "running decision batch") {
			t.Errorf("joiner of a batch whose send panicked: %v, want a batch error", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("joiner of a batch whose send panicked still waits after 5 s")
	}
	wg.Wait()
}

// TestBatchKeyless: a run with no keys never joins a batch (valkey-go's
// Cluster client cannot pipeline a keyless command with keyed ones).
func TestBatchKeyless(t *testing.T) {
	st, _ := newStore(t)
	if st.batches(context.Background(), &call{}) {
		t.Error("a keyless run may join a batch")
	}
	if !st.batches(context.Background(), &call{keys: []string{"rl:v2:{k}:fw"}}) {
		t.Error("a keyed run without a deadline may not join a batch")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if st.batches(ctx, &call{keys: []string{"rl:v2:{k}:fw"}}) {
		t.Error("a run whose deadline (1 s) is within Options.Timeout (5 s) may join a batch")
	}
}

// TestBatchIdleSendsAtOnce: with no batch in flight a leader sends without
// yielding (the server is idle: yielding only adds latency); with one in
// flight it yields so that others can join.
func TestBatchIdleSendsAtOnce(t *testing.T) {
	st, _ := newStore(t)
	var yields atomic.Int64
	st.batch.yield = func() { yields.Add(1) }
	l := algo.Limit{Kind: algo.FixedWindow, Count: 10, Period: 3_600_000}
	decide1(t, st, "rl:v2:{idle}:fw", l, 1, "", base)
	if n := yields.Load(); n != 0 {
		t.Errorf("a leader with no batch in flight yielded %d times, want 0", n)
	}
	st.batch.mu.Lock()
	st.batch.inflight++ // as if another batch were in flight
	st.batch.mu.Unlock()
	if d := decide1(t, st, "rl:v2:{idle}:fw", l, 1, "", base); d.Remaining != 8 {
		t.Errorf("remaining %d, want 8", d.Remaining)
	}
	if n := yields.Load(); n != 1 {
		t.Errorf("a leader with a batch in flight yielded %d times, want 1", n)
	}
}

// cmdCalls returns how many cmd (lower case, e.g. "get") commands srv has
// run (INFO commandstats).
func cmdCalls(t *testing.T, srv *redisserver.Server, cmd string) int64 {
	t.Helper()
	info, err := srv.Do(t, "INFO", "commandstats").ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			var n int64
			if _, err := fmt.Sscanf(v, "%d", &n); err != nil {
				t.Fatalf("parsing %q: %v", line, err)
			}
			return n
		}
	}
	return 0
}

// goCollect starts n goroutines on wg, each running f; once wg is done,
// the function it returns gives their results (in completion order).
func goCollect(wg *sync.WaitGroup, n int, f func() string) func() []string {
	var mu sync.Mutex
	var out []string
	for range n {
		wg.Go(func() {
			v := f()
			mu.Lock()
			out = append(out, v)
			mu.Unlock()
		})
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return out
	}
}

// evalshaCalls returns how many EVALSHA commands srv has run.
func evalshaCalls(t *testing.T, srv *redisserver.Server) int64 {
	return cmdCalls(t, srv, "evalsha")
}

// TestBatchMerge: identical concurrent decisions (one client's requests:
// same keys, limits, cost and time) go out as one script run deciding them
// in turn, with the same decisions and the same state as the same number of
// runs one after another — for every algorithm, in delay mode, with costs
// above 1 and with two checks per decision. Requests that differ (another
// key, another lease id) are not merged and decide as before.
func TestBatchMerge(t *testing.T) {
	st, srv := newStore(t)
	const n = 12
	// Periods of 100 s and more: keys expire in real time, decisions use
	// an injected now, and a loaded machine must not let the serial set's
	// keys expire before the merged run (see mergeLimits).
	tb := algo.Limit{Kind: algo.TokenBucket, Count: 10, Period: 100_000, Burst: 5}
	cases := []struct {
		name   string
		limits []algo.Limit
		cost   int64
	}{
		{"fixed window", []algo.Limit{{Kind: algo.FixedWindow, Count: 7, Period: 6_000_000}}, 1},
		{"sliding log", []algo.Limit{{Kind: algo.SlidingLog, Count: 7, Period: 6_000_000}}, 1},
		{"sliding window", []algo.Limit{{Kind: algo.SlidingWindow, Count: 9, Period: 1_000_000}}, 1},
		{"token bucket", []algo.Limit{tb}, 1},
		{"token bucket cost 2", []algo.Limit{tb}, 2},
		{"leaky bucket delay", []algo.Limit{{Kind: algo.LeakyBucket, Count: 10, Period: 100_000, Burst: 8, Delay: 3}}, 1},
		{"leaky bucket nodelay", []algo.Limit{{Kind: algo.LeakyBucket, Count: 10, Period: 100_000, Burst: 4, NoDelay: true}}, 1},
		{"two checks", []algo.Limit{tb, {Kind: algo.FixedWindow, Count: 4, Period: 6_000_000}}, 1},
	}
	cl := srv.Client(t)
	for ci, tc := range cases {
		// Key sets a (merged) and b (serial), each already charged twice
		// 300 ms before now.
		checks := func(set string) []store.Check {
			c := make([]store.Check, len(tc.limits))
			for i, l := range tc.limits {
				c[i] = store.Check{Key: fmt.Sprintf("rl:v2:{m%d%s}:%d", ci, set, i), Limit: l, Cost: tc.cost}
			}
			return c
		}
		a, b := checks("a"), checks("b")
		now := base + 5_000_300
		decideAt := func(c []store.Check, at int64) []algo.Decision {
			out := make([]algo.Decision, len(c))
			if _, err := st.Decide(context.Background(), c, at, out); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			return out
		}
		for range 2 {
			decideAt(a, now-300)
			decideAt(b, now-300)
		}
		var serial []string
		serialStart := time.Now()
		for range n {
			serial = append(serial, fmt.Sprint(decideAt(b, now)))
		}
		serialEnd := time.Now()

		// The batch: n identical decisions on a, one on another key and
		// two concurrency checks with their own lease ids: 4 runs.
		holdBatches(t, st, n+3, nil)
		before := evalshaCalls(t, srv)
		var wg sync.WaitGroup
		results := goCollect(&wg, n, func() string { return fmt.Sprint(decideAt(a, now)) })
		other := fmt.Sprintf("rl:v2:{m%dother}:0", ci)
		wg.Go(func() {
			if d := decideAt([]store.Check{{Key: other, Limit: tb, Cost: 1}}, now); !d[0].Allowed || d[0].Remaining != 4 {
				t.Errorf("%s: other key: %+v, want allowed, remaining 4", tc.name, d[0])
			}
		})
		conc := algo.Limit{Kind: algo.Concurrency, Count: 1, Period: 60_000}
		var held atomic.Int64
		for i := range 2 {
			wg.Go(func() {
				c := []store.Check{{Key: fmt.Sprintf("rl:v2:{m%dconc}:0", ci), Limit: conc, Cost: 1, Lease: fmt.Sprint("lease", i)}}
				if decideAt(c, now)[0].Allowed {
					held.Add(1)
				}
			})
		}
		wg.Wait()
		merged := results()
		mergedEnd := time.Now()
		st.batch.yield = nil
		if runs := evalshaCalls(t, srv) - before; runs != 4 {
			t.Errorf("%s: %d script runs for %d identical decisions and 3 others, want 4", tc.name, runs, n)
		}
		if h := held.Load(); h != 1 {
			t.Errorf("%s: %d of 2 leases granted on a limit of 1", tc.name, h)
		}
		slices.Sort(serial)
		slices.Sort(merged)
		if !slices.Equal(serial, merged) {
			t.Errorf("%s: merged decisions\n%v\nwant (serial)\n%v", tc.name, merged, serial)
		}

		// Same state: the same expiry (the last write's) and the same
		// decisions later on.
		for i := range a {
			readStart := time.Now()
			ta, err := cl.Do(context.Background(), cl.B().Pttl().Key(a[i].Key).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			tb, err := cl.Do(context.Background(), cl.B().Pttl().Key(b[i].Key).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			w := ttlWindow{histStart: serialStart, serialEnd: serialEnd, mergedEnd: mergedEnd, readStart: readStart, readEnd: time.Now()}
			if ta < 0 || tb < 0 || !w.same(ta, tb) {
				t.Errorf("%s: check %d: TTL %d ms merged, %d serial (%s)", tc.name, i, ta, tb, w)
			}
		}
		for _, later := range []int64{1, 15_000, 250_000} {
			if da, db := decideAt(a, now+later), decideAt(b, now+later); fmt.Sprint(da) != fmt.Sprint(db) {
				t.Errorf("%s: at now+%d ms: %v merged, %v serial", tc.name, later, da, db)
			}
		}
	}
}

// TestBatchTraced: a batch of three decisions is one traced round trip
// (Options.TraceRoundTrip) given the three callers' contexts, ended once
// without error.
func TestBatchTraced(t *testing.T) {
	st, _ := newStore(t)
	type mark struct{}
	var mu sync.Mutex
	var got [][]int
	ends := 0
	st.trace = func(ctxs []context.Context) func(error) {
		var ids []int
		for _, c := range ctxs {
			ids = append(ids, c.Value(mark{}).(int))
		}
		slices.Sort(ids)
		mu.Lock()
		got = append(got, ids)
		mu.Unlock()
		return func(err error) {
			if err != nil {
				t.Errorf("round trip ended with %v", err)
			}
			mu.Lock()
			ends++
			mu.Unlock()
		}
	}
	holdBatches(t, st, 3, nil)
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			l := algo.Limit{Kind: algo.FixedWindow, Count: 10, Period: 3_600_000}
			out := make([]algo.Decision, 1)
			c := []store.Check{{Key: fmt.Sprintf("rl:v2:{traced%d}:fw", g), Limit: l, Cost: 1}}
			if _, err := st.Decide(context.WithValue(context.Background(), mark{}, g), c, base, out); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || !slices.Equal(got[0], []int{0, 1, 2}) || ends != 1 {
		t.Fatalf("traced round trips %v (ended %d), want one of callers [0 1 2] ended once", got, ends)
	}
}
