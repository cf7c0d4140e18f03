package valkey

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/testutil/redisserver"
)

// everyKind has one limit per algorithm (10 per hour where it applies).
var everyKind = []algo.Limit{
	{Kind: algo.FixedWindow, Count: 10, Period: 3_600_000},
	{Kind: algo.SlidingLog, Count: 10, Period: 3_600_000},
	{Kind: algo.SlidingWindow, Count: 10, Period: 3_600_000},
	{Kind: algo.TokenBucket, Count: 10, Period: 3_600_000, Burst: 10},
	{Kind: algo.LeakyBucket, Count: 10, Period: 3_600_000, Burst: 9, NoDelay: true},
	{Kind: algo.Concurrency, Count: 10, Period: 3_600_000},
}

// TestMultiCheckAtomic: when the second check refuses, the first is not
// charged and reports its uncharged (peek) state.
func TestMultiCheckAtomic(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	for _, l := range everyKind {
		t.Run(fmt.Sprint(l.Kind), func(t *testing.T) {
			first := fmt.Sprintf("rl:v2:{atomic}:%d:first", l.Kind)
			tight := algo.Limit{Kind: algo.FixedWindow, Count: 1, Period: 3_600_000}
			checks := []store.Check{
				{Key: first, Limit: l, Cost: 1, Lease: "L1"},
				{Key: fmt.Sprintf("rl:v2:{atomic}:%d:tight", l.Kind), Limit: tight, Cost: 1},
			}
			out := make([]algo.Decision, 2)
			if _, err := st.Decide(ctx, checks, base, out); err != nil {
				t.Fatal(err)
			}
			if !out[0].Allowed || !out[1].Allowed || out[0].Remaining != 9 {
				t.Fatalf("first decision %+v, want both allowed, remaining 9", out)
			}
			checks[0].Lease = "L2"
			if _, err := st.Decide(ctx, checks, base+1, out); err != nil {
				t.Fatal(err)
			}
			if !out[0].Allowed || out[1].Allowed {
				t.Fatalf("second decision %+v, want first allowed, second refused", out)
			}
			if out[0].Remaining != 9 {
				t.Errorf("refused decision: first check remaining %d, want 9 (uncharged)", out[0].Remaining)
			}
			// The first check alone still has 9 left before this charge.
			if d := decide1(t, st, first, l, 1, "L3", base+2); !d.Allowed || d.Remaining != 8 {
				t.Errorf("after the refusal: %+v, want allowed with remaining 8", d)
			}
		})
	}
}

// TestRace: concurrent Decides on one key of 10 per hour admit exactly 10,
// for every algorithm, at 50 and 500 concurrent requests, with the
// server's clock (now = 0).
func TestRace(t *testing.T) {
	st, _ := newStore(t)
	for _, n := range []int{50, 500} {
		for _, l := range everyKind {
			t.Run(fmt.Sprintf("%d/%d", n, l.Kind), func(t *testing.T) {
				key := fmt.Sprintf("rl:v2:{race}:%d:%d", n, l.Kind)
				var ok atomic.Int64
				var wg sync.WaitGroup
				start := make(chan struct{})
				for i := range n {
					wg.Go(func() {
						<-start
						out := make([]algo.Decision, 1)
						c := []store.Check{{Key: key, Limit: l, Cost: 1, Lease: fmt.Sprint("lease-", i)}}
						if _, err := st.Decide(context.Background(), c, 0, out); err != nil {
							t.Error(err)
							return
						}
						if out[0].Allowed {
							ok.Add(1)
						}
					})
				}
				close(start)
				wg.Wait()
				if ok.Load() != 10 {
					t.Errorf("admitted %d of %d, want exactly 10", ok.Load(), n)
				}
			})
		}
	}
}

// TestEveryKeyExpires: each algorithm's key carries a PEXPIRE equal to the
// time until it is idle (documented per algorithm below).
func TestEveryKeyExpires(t *testing.T) {
	st, srv := newStore(t)
	ctx := context.Background()
	now := time.Now().UnixMilli() // real time: PTTL counts down on the server
	for _, l := range everyKind {
		key := fmt.Sprintf("rl:v2:{ttl}:%d", l.Kind)
		out := make([]algo.Decision, 1)
		if _, err := st.Decide(ctx, []store.Check{{Key: key, Limit: l, Cost: 1, Lease: "x"}}, now, out); err != nil {
			t.Fatal(err)
		}
		pttl, err := srv.Do(t, "PTTL", key).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		// Windows keep the key until the end of the next window only for
		// the sliding counter (its count weighs as prev there).
		want := out[0].ResetAfter
		if l.Kind == algo.SlidingWindow {
			want += l.Period
		}
		if pttl <= 0 || pttl > want || pttl < want-1000 {
			t.Errorf("kind %d: PTTL %d ms, want %d (−1 s margin)", l.Kind, pttl, want)
		}
	}
}

// TestScriptFlush: SCRIPT FLUSH in the middle of traffic causes no error
// (EVALSHA's NOSCRIPT falls back to EVAL) and loses no count.
func TestScriptFlush(t *testing.T) {
	st, srv := newStore(t)
	l := algo.Limit{Kind: algo.FixedWindow, Count: 1000, Period: 3_600_000}
	var wg sync.WaitGroup
	var ok atomic.Int64
	for g := range 8 {
		wg.Go(func() {
			out := make([]algo.Decision, 1)
			for i := range 50 {
				c := []store.Check{{Key: "rl:v2:{flush}:fw", Limit: l, Cost: 1}}
				if _, err := st.Decide(context.Background(), c, base, out); err != nil {
					t.Errorf("goroutine %d request %d: %v", g, i, err)
					return
				}
				if out[0].Allowed {
					ok.Add(1)
				}
			}
		})
	}
	for range 10 {
		if err := srv.Do(t, "SCRIPT", "FLUSH").Error(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	if ok.Load() != 400 {
		t.Errorf("admitted %d, want 400", ok.Load())
	}
	if d := decide1(t, st, "rl:v2:{flush}:fw", l, 0, "", base); d.Remaining != 600 {
		t.Errorf("remaining %d after 400 requests, want 600", d.Remaining)
	}
}

// TestMemoryPerClient reports MEMORY USAGE per client after 1,000 requests
// at 1,000/hour (brief): compact packed states, and the log's cost.
func TestMemoryPerClient(t *testing.T) {
	st, srv := newStore(t)
	ctx := context.Background()
	limits := []algo.Limit{
		{Kind: algo.FixedWindow, Count: 1000, Period: 3_600_000},
		{Kind: algo.SlidingLog, Count: 1000, Period: 3_600_000},
		{Kind: algo.SlidingWindow, Count: 1000, Period: 3_600_000},
		{Kind: algo.TokenBucket, Count: 1000, Period: 3_600_000, Burst: 1000},
		{Kind: algo.LeakyBucket, Count: 1000, Period: 3_600_000, Burst: 999},
	}
	limitMax := map[algo.Kind]int64{algo.FixedWindow: 128, algo.SlidingWindow: 192, algo.TokenBucket: 128, algo.LeakyBucket: 128}
	usage := map[algo.Kind]int64{}
	// Start at an hour boundary so all 1,000 fall in one fixed window.
	start := (time.Now().UnixMilli()/3_600_000 + 1) * 3_600_000
	for _, l := range limits {
		srv.Do(t, "FLUSHALL")
		key := "rl:v2:{c42}:" + fmt.Sprint(l.Kind)
		for i := range int64(1000) {
			if d := decide1(t, st, key, l, 1, "", start+3600*i); !d.Allowed {
				t.Fatalf("kind %d: request %d refused", l.Kind, i)
			}
		}
		n, err := st.MemoryUsage(ctx, "c42")
		if err != nil {
			t.Fatal(err)
		}
		usage[l.Kind] = n
		t.Logf("kind %d: %d B per client", l.Kind, n)
		if m, ok := limitMax[l.Kind]; ok && n > m {
			t.Errorf("kind %d: %d B per client, want <= %d", l.Kind, n, m)
		}
	}
	if r := usage[algo.SlidingLog] / usage[algo.FixedWindow]; r < 500 {
		t.Errorf("sliding log %d B = %d× fixed window, want >= 500×", usage[algo.SlidingLog], r)
	}
}

// TestServerDown: New succeeds while the server is down, Decide fails
// then, works once it is up, fails during an outage and works on the first
// decision after it and every one that follows.
func TestServerDown(t *testing.T) {
	srv := redisserver.Start(t)
	srv.Stop()
	st, err := New(context.Background(), Options{Addrs: []string{srv.Addr}, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatalf("New with the server down: %v", err)
	}
	defer st.Close()
	l := algo.Limit{Kind: algo.FixedWindow, Count: 5, Period: 3_600_000}
	c := []store.Check{{Key: "rl:v2:{down}:fw", Limit: l, Cost: 1}}
	out := make([]algo.Decision, 1)
	if _, err := st.Decide(context.Background(), c, base, out); err == nil {
		t.Fatalf("Decide with the server down: no error")
	}
	srv.Restart()
	if _, err := st.Decide(context.Background(), c, base, out); err != nil || out[0].Remaining != 4 {
		t.Fatalf("Decide after start: %+v, %v; want remaining 4", out[0], err)
	}
	srv.Stop()
	if _, err := st.Decide(context.Background(), c, base, out); err == nil {
		t.Fatalf("Decide during an outage: no error")
	}
	srv.Restart() // empty dataset: nothing persisted
	// The failed decision dropped the store's one connection, so the next
	// dials the restarted server, and no connection from before the outage
	// is left to fail a later decision with EOF.
	for i := range 20 {
		if _, err := st.Decide(context.Background(), c, base, out); err != nil {
			t.Fatalf("decision %d after the restart: %v", i+1, err)
		}
		if want := max(int64(4-i), 0); out[0].Remaining != want {
			t.Fatalf("decision %d after the restart: remaining %d, want %d (fresh server)", i+1, out[0].Remaining, want)
		}
	}
}

// TestTimeout: a server that does not answer (busy in DEBUG SLEEP) makes
// Decide fail with a deadline error after Options.Timeout.
func TestTimeout(t *testing.T) {
	st, srv := newSleepyStore(t)
	l := algo.Limit{Kind: algo.FixedWindow, Count: 5, Period: 3_600_000}
	warmUp(t, st) // connected before the server sleeps
	defer func(slept <-chan struct{}) { <-slept }(srv.DebugSleep(t, "0.8"))
	out := make([]algo.Decision, 1)
	begin := time.Now()
	_, err := st.Decide(context.Background(), []store.Check{{Key: "rl:v2:{slow}:fw", Limit: l, Cost: 1}}, base, out)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Decide against a sleeping server: %v, want a deadline error", err)
	}
	if el := time.Since(begin); el > 500*time.Millisecond {
		t.Errorf("Decide took %v, want about 200 ms", el)
	}
}

// TestSentinel: with SentinelMaster the store asks the Sentinel for the
// master and decides there.
func TestSentinel(t *testing.T) {
	master := redisserver.Start(t)
	sentinel := redisserver.StartSentinel(t, "rlmaster", master)
	st, err := New(context.Background(), Options{Addrs: []string{sentinel.Addr}, SentinelMaster: "rlmaster", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l := algo.Limit{Kind: algo.FixedWindow, Count: 5, Period: 3_600_000}
	if d := decide1(t, st, "rl:v2:{sentinel}:fw", l, 1, "", base); !d.Allowed || d.Remaining != 4 {
		t.Fatalf("decision via Sentinel: %+v, want allowed, remaining 4", d)
	}
	if n, err := master.Do(t, "EXISTS", "rl:v2:{sentinel}:fw").AsInt64(); err != nil || n != 1 {
		t.Fatalf("key on the master: EXISTS = %d, %v; want 1", n, err)
	}
}
