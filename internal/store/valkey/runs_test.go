package valkey

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/redisserver"
)

// testCall builds a call with ARGV for key at now in mode, cost 1 of a
// fixed window, and lease.
func testCall(ctx context.Context, st *Store, mode, key, lease string) *call {
	cl := &call{done: make(chan reply, 1), ctx: ctx}
	l := algo.Limit{Kind: algo.FixedWindow, Count: 5, Period: 1000}
	st.scriptArgs(cl, mode, []store.Check{{Key: key, Limit: l, Cost: 1, Lease: lease}}, base)
	return cl
}

// TestGroupRuns: identical decide calls merge into one run in the order
// they joined, up to maxMerge; another key, another lease id, another mode
// and an ended context each make runs of their own; a run of one call
// shares the batch's array without letting a merge overwrite it.
func TestGroupRuns(t *testing.T) {
	st := &Store{}
	bg := context.Background()
	ended, cancel := context.WithCancel(bg)
	cancel()
	a1, a2, a3 := testCall(bg, st, modeDecide, "rl:{a}", ""), testCall(bg, st, modeDecide, "rl:{a}", ""), testCall(bg, st, modeDecide, "rl:{a}", "")
	b := testCall(bg, st, modeDecide, "rl:{b}", "")
	lease := testCall(bg, st, modeDecide, "rl:{a}", "L1")
	check := testCall(bg, st, modeCheck, "rl:{a}", "")
	gone := testCall(ended, st, modeDecide, "rl:{a}", "")
	calls := []*call{a1, b, a2, lease, gone, check, a3}
	runs := groupRuns(calls)
	var got []string
	for _, r := range runs {
		s := fmt.Sprint(len(r.calls))
		if r.skip != nil {
			s += " skip"
		}
		got = append(got, s)
	}
	// a1+a2 merge; the lease call differs and becomes {a}'s newest run,
	// then check does; a3 meets check (mode 1, never merged): a run again.
	want := []string{"2", "1", "1", "1 skip", "1", "1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("runs %v, want %v", got, want)
	}
	if runs[0].calls[0] != a1 || runs[0].calls[1] != a2 || calls[1] != b || calls[2] != a2 {
		t.Error("merging reordered the run or overwrote the batch's calls")
	}
	if r := runs[0].args(); r[2] != "2" || a1.args[2] != "1" {
		t.Errorf("merged run's n %q (head's own ARGV %q), want 2 (1)", r[2], a1.args[2])
	}
	many := make([]*call, maxMerge+3)
	for i := range many {
		many[i] = testCall(bg, st, modeDecide, "rl:{hot}", "")
	}
	if runs := groupRuns(many); len(runs) != 2 || len(runs[0].calls) != maxMerge || len(runs[1].calls) != 3 {
		t.Errorf("%d identical calls: %d runs, want %d + 3", len(many), len(runs), maxMerge)
	}
	runs[0].answer(valkeygo.ValkeyResult{}, nil)
	for i, cl := range []*call{a1, a2} {
		if r := <-cl.done; r.rep != i || r.n != 2 {
			t.Errorf("call %d of the merged run: rep %d of %d, want %d of 2", i, r.rep, r.n, i)
		}
	}
}

// TestRoundTripsReported: a batch of 8 decisions that times out against a
// sleeping server is one failed round trip for Options.OnRoundTrip, not
// eight; a batch that succeeds is one success.
func TestRoundTripsReported(t *testing.T) {
	srv := redisserver.Start(t, "--enable-debug-command", "yes")
	var mu sync.Mutex
	var trips []error
	st, err := New(context.Background(), Options{Addrs: []string{srv.Addr}, Timeout: 200 * time.Millisecond,
		OnRoundTrip: func(node string, err error) {
			if node != srv.Addr {
				t.Errorf("round trip to node %q, want %q", node, srv.Addr)
			}
			mu.Lock()
			trips = append(trips, err)
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l := algo.Limit{Kind: algo.FixedWindow, Count: 5, Period: 3_600_000}
	decide1(t, st, "rl:v2:{warm}:fw", l, 1, "", base) // one round trip, alone
	srv.Client(t)                                     // connect before the server sleeps
	const callers = 8
	round := func(name string, sleep bool) []error {
		var slept <-chan struct{}
		defer func() {
			if slept != nil {
				<-slept
			}
		}()
		mu.Lock()
		trips = nil
		mu.Unlock()
		holdBatches(t, st, callers, func() {
			if sleep {
				slept = srv.DebugSleep(t, "0.5")
			}
		})
		var wg sync.WaitGroup
		for g := range callers {
			wg.Go(func() {
				out := make([]algo.Decision, 1)
				_, err := st.Decide(context.Background(), []store.Check{{Key: fmt.Sprintf("rl:v2:{%s%d}:fw", name, g), Limit: l, Cost: 1}}, base, out)
				if sleep != errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%s caller %d: %v", name, g, err)
				}
			})
		}
		wg.Wait()
		st.batch.yield = nil
		mu.Lock()
		defer mu.Unlock()
		return trips
	}
	if got := round("slow", true); len(got) != 1 || !errors.Is(got[0], context.DeadlineExceeded) {
		t.Errorf("a timed-out batch of %d reported %v, want one deadline error", callers, got)
	}
	if got := round("fast", false); len(got) != 1 || got[0] != nil {
		t.Errorf("an answered batch of %d reported %v, want one nil", callers, got)
	}
}

// TestUnreachableReported: a store whose server was never reached (nothing
// listens at its address) reports each failed connection (New's first,
// then each decision's) as a failed round trip to its node, so its breaker opens and its errors are counted, as
// for a server that went away.
func TestUnreachableReported(t *testing.T) {
	addr := netutil.FreeAddr(t) // nothing listens there
	var mu sync.Mutex
	var trips []string
	st, err := New(context.Background(), Options{Addrs: []string{addr}, Timeout: 200 * time.Millisecond,
		OnRoundTrip: func(node string, err error) {
			mu.Lock()
			defer mu.Unlock()
			trips = append(trips, fmt.Sprintf("%s %v", node, err != nil))
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l := algo.Limit{Kind: algo.FixedWindow, Count: 5, Period: 3_600_000}
	for range 2 {
		out := make([]algo.Decision, 1)
		if _, err := st.Decide(context.Background(), []store.Check{{Key: "rl:v2:{u}:fw", Limit: l, Cost: 1}}, base, out); err == nil {
			t.Fatal("decided without a server")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// New's own attempt to connect, then one per decision.
	if want := fmt.Sprint([]string{addr + " true", addr + " true", addr + " true"}); fmt.Sprint(trips) != want {
		t.Errorf("round trips %v, want %v", trips, want)
	}
}
