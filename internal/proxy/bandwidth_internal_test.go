package proxy

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"
)

// TestPause: n bytes at rate bytes per second take n/rate seconds.
func TestPause(t *testing.T) {
	const mib = 1 << 20
	for i, c := range []struct {
		n, rate int64
		want    time.Duration
	}{
		{0, mib, 0},
		{mib / 2, mib, 500 * time.Millisecond},
		{64 << 10, mib, 62500 * time.Microsecond},
		{1000, 1000, time.Second},
		{3 * mib, mib, 3 * time.Second},
	} {
		if got := pause(c.n, c.rate); got != c.want {
			t.Errorf("step %d: pause(%d, %d) = %v, want %v", i, c.n, c.rate, got, c.want)
		}
	}
}

// TestNextTurn steps the schedule at fixed instants: turns follow each
// other by the bytes' time, whatever the writes took, and a writer more
// than maxCatchUp behind is re-anchored there.
func TestNextTurn(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ms := time.Millisecond
	for i, c := range []struct {
		prev, now time.Time
		d         time.Duration
		want      time.Time
	}{
		{time.Time{}, t0, 100 * ms, t0.Add(100 * ms)},                      // the first paced write
		{t0.Add(100 * ms), t0.Add(130 * ms), 100 * ms, t0.Add(200 * ms)},   // the write ran late by 30 ms: absorbed
		{t0.Add(200 * ms), t0.Add(1100 * ms), 100 * ms, t0.Add(300 * ms)},  // 900 ms behind: caught up
		{t0.Add(300 * ms), t0.Add(3000 * ms), 100 * ms, t0.Add(2100 * ms)}, // 2.7 s behind: one second at most
	} {
		if got := nextTurn(c.prev, c.now, c.d); !got.Equal(c.want) {
			t.Errorf("step %d: nextTurn = %v, want %v", i, got.Sub(t0), c.want.Sub(t0))
		}
	}
}

// TestRateWriterAllowance: the first `after` bytes go out in one write
// with no turn to wait; the paced bytes after them are written in pieces
// of rate/16 (at least 512), and the first paced piece does not wait.
func TestRateWriterAllowance(t *testing.T) {
	rec := httptest.NewRecorder()
	w := newRateWriter(rec, context.Background(), 16<<10, 1000)
	start := time.Now()
	if n, err := w.Write(make([]byte, 1500)); n != 1500 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if w.sent != 1500 || rec.Body.Len() != 1500 {
		t.Fatalf("sent %d, recorded %d, want 1500", w.sent, rec.Body.Len())
	}
	// 500 paced bytes were written: the next turn is 500/16384 s after.
	if d := w.due.Sub(start); d < pause(500, 16<<10) {
		t.Errorf("next turn %v after the start, want at least %v", d, pause(500, 16<<10))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w.ctx, w.due = ctx, time.Now().Add(time.Hour)
	if _, err := w.Write([]byte("x")); err != context.Canceled {
		t.Errorf("Write while the client is gone: %v, want context.Canceled", err)
	}
}
