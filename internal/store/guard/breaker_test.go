package guard

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
	"rlproxy/internal/testutil/waitfor"
)

// scriptStore is a store.Store whose Decide returns the error the test sets
// (nil: one accepted decision) and counts the calls that reach it.
type scriptStore struct {
	mu       sync.Mutex
	err      error
	calls    int
	releases int
	// block, when non-nil, is received from before Decide returns.
	block chan error
}

func (s *scriptStore) Decide(ctx context.Context, checks []store.Check, now int64, out []algo.Decision) (int64, error) {
	s.mu.Lock()
	s.calls++
	err, block := s.err, s.block
	s.mu.Unlock()
	if block != nil {
		err = <-block
	}
	if err != nil {
		return 0, err
	}
	for i := range out {
		out[i] = algo.Decision{Allowed: true}
	}
	return now, nil
}

func (s *scriptStore) Release(ctx context.Context, checks []store.Check) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releases++
	return s.err
}

func (s *scriptStore) Close() error { return nil }

func (s *scriptStore) set(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

func (s *scriptStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// fakeClock is a settable clock for BreakerOptions.Now.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) set(d time.Duration) { c.ns.Store(int64(time.Hour) + int64(d)) }

var errDown = errors.New("dial tcp 127.0.0.1:6379: connection refused")

// TestBreakerSteps walks the state machine at fixed instants (Failures 3,
// Cooldown 500 ms, one probe) and checks, after each Decide, the error, how many
// decisions reached the store in total, Up and the state-change callbacks.
func TestBreakerSteps(t *testing.T) {
	bg := context.Background()
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	steps := []struct {
		at      time.Duration
		ctx     context.Context
		store   error // what the store answers, if called
		wantErr error
		calls   int // cumulative calls reaching the store
		up      bool
		changes string
	}{
		{0, bg, errDown, errDown, 1, true, ""},
		{0, bg, nil, nil, 2, true, ""}, // success resets the count
		{0, bg, errDown, errDown, 3, true, ""},
		{0, bg, context.DeadlineExceeded, context.DeadlineExceeded, 4, true, ""},
		{1, cancelled, context.Canceled, context.Canceled, 5, true, ""}, // caller gave up: neutral
		{2, bg, errDown, errDown, 6, false, "open "},                    // 3rd consecutive failure opens
		{2, bg, nil, ErrOpen, 6, false, "open "},
		{500*time.Millisecond + 1, bg, nil, ErrOpen, 6, false, "open "},
		{500*time.Millisecond + 2, bg, errDown, errDown, 7, false, "open "}, // probe fails: re-open
		{500*time.Millisecond + 3, bg, nil, ErrOpen, 7, false, "open "},
		{time.Second + 1, bg, nil, ErrOpen, 7, false, "open "},
		{time.Second + 2, cancelled, context.Canceled, context.Canceled, 8, false, "open "}, // cancelled probe
		{time.Second + 2, bg, nil, nil, 9, true, "open close "},                             // next caller probes, closes
		{time.Second + 3, bg, errDown, errDown, 10, true, "open close "},
		{time.Second + 3, bg, errDown, errDown, 11, true, "open close "},
		{time.Second + 3, bg, errDown, errDown, 12, false, "open close open "},
		{time.Second + 4, bg, nil, ErrOpen, 12, false, "open close open "},
	}
	clk := &fakeClock{}
	st := &scriptStore{}
	var changes string
	b := newBreaker(st, BreakerOptions{Failures: 3, Cooldown: 500 * time.Millisecond, Probes: 1, Now: clk.now,
		OnStateChange: func(open bool) {
			if open {
				changes += "open "
			} else {
				changes += "close "
			}
		}})
	out := make([]algo.Decision, 1)
	checks := []store.Check{{Key: "k", Cost: 1}}
	for i, s := range steps {
		clk.set(s.at)
		st.set(s.store)
		_, err := b.Decide(s.ctx, checks, 0, out)
		if !errors.Is(err, s.wantErr) || (err == nil) != (s.wantErr == nil) {
			t.Fatalf("step %d (at %v): err = %v, want %v", i, s.at, err, s.wantErr)
		}
		if got := st.count(); got != s.calls {
			t.Fatalf("step %d (at %v): store calls = %d, want %d", i, s.at, got, s.calls)
		}
		if b.Up() != s.up {
			t.Fatalf("step %d (at %v): Up = %v, want %v", i, s.at, b.Up(), s.up)
		}
		if changes != s.changes {
			t.Fatalf("step %d (at %v): state changes %q, want %q", i, s.at, changes, s.changes)
		}
	}
	// Release passes through while open and does not move the state.
	if err := b.Release(bg, checks); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if st.releases != 1 || b.Up() {
		t.Fatalf("after Release: releases %d, Up %v; want 1, false", st.releases, b.Up())
	}
}

// TestBreakerDefaults checks that the zero options mean 5 failures and a
// 500 ms cooldown.
func TestBreakerDefaults(t *testing.T) {
	clk := &fakeClock{}
	clk.set(0)
	st := &scriptStore{err: errDown}
	b := newBreaker(st, BreakerOptions{Now: clk.now})
	out := make([]algo.Decision, 1)
	for range 10 {
		b.Decide(context.Background(), nil, 0, out)
	}
	if st.count() != 5 {
		t.Fatalf("store calls = %d, want 5", st.count())
	}
	clk.set(499 * time.Millisecond)
	b.Decide(context.Background(), nil, 0, out)
	clk.set(500 * time.Millisecond)
	b.Decide(context.Background(), nil, 0, out)
	if st.count() != 6 {
		t.Fatalf("store calls = %d, want 6 (one probe at 500 ms)", st.count())
	}
}

// TestBreakerOneProbe checks (Probes 1) that while a probe is in flight every other
// caller gets ErrOpen without reaching the store, and that the probe's
// success closes the circuit for all.
func TestBreakerOneProbe(t *testing.T) {
	clk := &fakeClock{}
	clk.set(0)
	st := &scriptStore{err: errDown}
	b := newBreaker(st, BreakerOptions{Failures: 1, Probes: 1, Now: clk.now})
	out := make([]algo.Decision, 1)
	b.Decide(context.Background(), nil, 0, out) // opens
	clk.set(time.Second)
	st.mu.Lock()
	st.block = make(chan error)
	st.mu.Unlock()

	probeDone := make(chan error)
	go func() {
		_, err := b.Decide(context.Background(), nil, 0, make([]algo.Decision, 1))
		probeDone <- err
	}()
	waitfor.True(t, "the probe blocked at the store", func() bool { return st.count() == 2 })
	var wg sync.WaitGroup
	var open atomic.Int64
	for range 50 {
		wg.Go(func() {
			if _, err := b.Decide(context.Background(), nil, 0, make([]algo.Decision, 1)); errors.Is(err, ErrOpen) {
				open.Add(1)
			}
		})
	}
	wg.Wait()
	if open.Load() != 50 || st.count() != 2 {
		t.Fatalf("during the probe: %d of 50 got ErrOpen, store calls %d; want 50, 2", open.Load(), st.count())
	}
	st.block <- nil
	if err := <-probeDone; err != nil {
		t.Fatalf("probe: %v", err)
	}
	st.mu.Lock()
	st.block, st.err = nil, nil
	st.mu.Unlock()
	if _, err := b.Decide(context.Background(), nil, 0, out); err != nil || !b.Up() {
		t.Fatalf("after the probe: err %v, Up %v; want nil, true", err, b.Up())
	}
}

// TestBreakerConcurrent hammers the breaker from many goroutines with a
// flapping store (for -race) and checks that every call was either refused
// with ErrOpen or answered by the store, never both and never lost.
func TestBreakerConcurrent(t *testing.T) {
	st := &flakyStore{}
	b := newBreaker(st, BreakerOptions{Failures: 3, Cooldown: time.Millisecond})
	var wg sync.WaitGroup
	var open, reached atomic.Int64
	for g := range 8 {
		wg.Go(func() {
			out := make([]algo.Decision, 1)
			for i := range 2000 {
				_, err := b.Decide(context.Background(), nil, int64(g*10000+i), out)
				if errors.Is(err, ErrOpen) {
					open.Add(1)
				} else {
					reached.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if open.Load()+reached.Load() != 16000 || reached.Load() != st.calls.Load() {
		t.Fatalf("open %d + reached %d != 16000, or reached != store calls %d", open.Load(), reached.Load(), st.calls.Load())
	}
	t.Logf("refused open: %d, reached the store: %d", open.Load(), reached.Load())
}

// flakyStore fails in runs: 20 decisions fail, 20 succeed.
type flakyStore struct{ calls atomic.Int64 }

func (s *flakyStore) Decide(ctx context.Context, checks []store.Check, now int64, out []algo.Decision) (int64, error) {
	if (s.calls.Add(1)/20)%2 == 0 {
		return 0, fmt.Errorf("deciding: %w", errDown)
	}
	return now, nil
}
func (s *flakyStore) Release(context.Context, []store.Check) error { return nil }
func (s *flakyStore) Close() error                                 { return nil }

// BenchmarkBreakerClosed measures the closed-state overhead.
func BenchmarkBreakerClosed(b *testing.B) {
	br := newBreaker(&scriptStore{}, BreakerOptions{})
	out := make([]algo.Decision, 1)
	b.ReportAllocs()
	for b.Loop() {
		br.Decide(context.Background(), nil, 1, out)
	}
}
