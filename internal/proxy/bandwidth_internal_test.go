package proxy

import (
	"testing"
	"time"
)

// TestPaceDelay steps the pacing arithmetic at fixed instants: at 1 MiB/s
// the byte after 512 KiB of paced bytes is due 500 ms after pacing began.
func TestPaceDelay(t *testing.T) {
	const mib = 1 << 20
	ms := time.Millisecond
	for i, c := range []struct {
		paced, rate int64
		elapsed     time.Duration
		want        time.Duration
	}{
		{0, mib, 0, 0},              // the first paced byte goes at once
		{mib / 2, mib, 0, 500 * ms}, // half a second's bytes ahead
		{mib / 2, mib, 200 * ms, 300 * ms},
		{mib / 2, mib, 500 * ms, 0},         // due now
		{mib / 2, mib, 700 * ms, -200 * ms}, // late (a slow reader): no wait until caught up, as nginx
		{1000, 1000, 0, time.Second},
		{3 * mib, mib, 0, 3 * time.Second},
	} {
		if got := paceDelay(c.paced, c.rate, c.elapsed); got != c.want {
			t.Errorf("step %d: paceDelay(%d, %d, %v) = %v, want %v", i, c.paced, c.rate, c.elapsed, got, c.want)
		}
	}
}
