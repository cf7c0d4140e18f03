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
)

// holdBatches makes st's batch leaders wait, instead of yielding, until
// their batch holds n calls (failing t after 10 s), then run then (may be
// nil) before sending. It returns the number of batches sent so far.
func holdBatches(t *testing.T, st *Store, n int, then func()) *atomic.Int64 {
	var sent atomic.Int64
	st.batch.yield = func() {
		for give := time.Now().Add(10 * time.Second); ; {
			st.batch.mu.Lock()
			k := len(st.batch.collect.calls)
			st.batch.mu.Unlock()
			if k == n {
				break
			}
			if time.Now().After(give) {
				t.Errorf("batch holds %d calls after 10 s, want %d to join", k, n)
				break
			}
			time.Sleep(time.Millisecond)
		}
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
				c := []store.Check{{Key: fmt.Sprintf("rl:v1:{batch%d}:fw", g), Limit: l, Cost: 1}}
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

// TestBatchCallerLeaves: a caller whose context ends while its batch is
// held gets its context's error at once; the batch still runs its check
// (as a script already sent would) and answers the others, whose leader's
// own context ended too.
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
		if d, err := decide(leaderCtx, "rl:v1:{leader}:fw"); err != nil || d.Remaining != 9 {
			t.Errorf("leader: %+v, %v; want remaining 9", d, err)
		}
	})
	for !st.batchOpen() {
		time.Sleep(time.Millisecond)
	}
	wg.Go(func() {
		if d, err := decide(context.Background(), "rl:v1:{stayer}:fw"); err != nil || d.Remaining != 9 {
			t.Errorf("caller that stayed: %+v, %v; want remaining 9", d, err)
		}
	})
	go func() {
		_, err := decide(leaverCtx, "rl:v1:{leaver}:fw")
		left <- err
	}()
	wg.Wait()
	st.batch.yield = nil
	if d := decide1(t, st, "rl:v1:{leaver}:fw", l, 0, "", base); d.Remaining != 9 {
		t.Errorf("peek of the check whose caller left: remaining %d, want 9 (it ran)", d.Remaining)
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
	decide1(t, st, "rl:v1:{warm}:fw", l, 1, "", base) // the script is cached
	if err := srv.Do(t, "SCRIPT", "FLUSH").Error(); err != nil {
		t.Fatal(err)
	}
	holdBatches(t, st, callers, nil)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			out := make([]algo.Decision, 1)
			c := []store.Check{{Key: fmt.Sprintf("rl:v1:{ns%d}:fw", g), Limit: l, Cost: 1}}
			if _, err := st.Decide(context.Background(), c, base, out); err != nil || out[0].Remaining != 9 {
				t.Errorf("caller %d after SCRIPT FLUSH: %+v, %v; want remaining 9", g, out[0], err)
			}
		})
	}
	wg.Wait()
	st.batch.yield = nil
	for g := range callers {
		if d := decide1(t, st, fmt.Sprintf("rl:v1:{ns%d}:fw", g), l, 0, "", base); d.Remaining != 9 {
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
	var sleeping sync.WaitGroup
	defer sleeping.Wait()
	holdBatches(t, st, callers, func() {
		sleeping.Go(func() { srv.Do(t, "DEBUG", "SLEEP", "0.8") })
		time.Sleep(100 * time.Millisecond)
	})
	l := algo.Limit{Kind: algo.FixedWindow, Count: 5, Period: 3_600_000}
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			out := make([]algo.Decision, 1)
			c := []store.Check{{Key: fmt.Sprintf("rl:v1:{slow%d}:fw", g), Limit: l, Cost: 1}}
			_, err := st.Decide(context.Background(), c, base, out)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("caller %d against a sleeping server: %v, want a deadline error", g, err)
			}
		})
	}
	begin := time.Now()
	wg.Wait()
	// The batch waits for its 8 callers, sleeps 100 ms, then times out 200
	// ms after it is sent; the server sleeps for 800 ms.
	if el := time.Since(begin); el > 600*time.Millisecond {
		t.Errorf("the batch failed after %v, want about 300 ms", el)
	}
}
