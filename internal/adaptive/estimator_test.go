package adaptive

import (
	"testing"
	"time"
)

// window is one estimator window of 100 ms: n responses of rtt ms from
// requests admitted at inflight, the last closing the window, and the
// limit and estimated concurrency that must follow.
type window struct {
	n, rtt, inflight int
	limit            int
	estimate         float64
}

// runWindows feeds steps one window each, the first opening at *at.
func runWindows(t *testing.T, e *Estimator, at *time.Time, steps []window) {
	t.Helper()
	for i, s := range steps {
		for j := range s.n {
			ts := at.Add(time.Duration(j+1) * 100 * time.Millisecond / time.Duration(s.n))
			e.Sample(time.Duration(s.rtt)*time.Millisecond, s.inflight, ts)
		}
		*at = at.Add(100 * time.Millisecond)
		if got, est := e.Limit(), e.Estimate(); got != s.limit || !near(est, s.estimate) {
			t.Fatalf("step %d (%d responses, rtt %d ms): limit %d, estimate %.4f; want %d, %.4f", i, s.n, s.rtt, got, est, s.limit, s.estimate)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func testConfig() Config {
	return Config{Min: 1, Max: 50, Initial: 4, Window: 100 * time.Millisecond, Tolerance: 0.2, QueueTimeout: time.Second}
}

// TestEstimatorSteps: an upstream of 8 workers × 20 ms (400 r/s), then
// 4 workers. Each window's responses are what the limit lets through.
func TestEstimatorSteps(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	e := NewEstimator(testConfig(), at)
	runWindows(t, e, &at, []window{
		{n: 20, rtt: 20, inflight: 4, limit: 8, estimate: 4},   // 200 r/s × 20 ms: startup doubles
		{n: 40, rtt: 20, inflight: 8, limit: 16, estimate: 8},  // 400 r/s: grew ≥ 25 %
		{n: 40, rtt: 40, inflight: 16, limit: 16, estimate: 8}, // capacity: no growth (1)
		{n: 40, rtt: 40, inflight: 16, limit: 16, estimate: 8}, // (2)
		{n: 40, rtt: 40, inflight: 16, limit: 10, estimate: 8}, // (3): startup over; probe at 5/4
		{n: 40, rtt: 25, inflight: 10, limit: 6, estimate: 8},  // drain at 3/4
		{n: 30, rtt: 20, inflight: 6, limit: 9, estimate: 8},   // cruise at 1.2: 9.6
		{n: 20, rtt: 40, inflight: 50, limit: 9, estimate: 8},  // 4 workers from here: 200 r/s
		{n: 20, rtt: 40, inflight: 50, limit: 9, estimate: 8},  // the best rate of 10 windows holds
		{n: 20, rtt: 40, inflight: 50, limit: 9, estimate: 8},  //
		{n: 20, rtt: 40, inflight: 50, limit: 9, estimate: 8},  //
		{n: 20, rtt: 40, inflight: 50, limit: 9, estimate: 8},  //
		{n: 20, rtt: 40, inflight: 50, limit: 10, estimate: 8}, // probe
		{n: 20, rtt: 40, inflight: 50, limit: 6, estimate: 8},  // drain
		{n: 20, rtt: 40, inflight: 50, limit: 9, estimate: 8},  // the last 400 r/s window leaves
		{n: 20, rtt: 40, inflight: 50, limit: 7, estimate: 6},  // 300 r/s (the drain window's) is the best
		{n: 20, rtt: 40, inflight: 50, limit: 4, estimate: 4},  // 200 r/s × 20 ms: 4.8
		{n: 20, rtt: 20, inflight: 50, limit: 4, estimate: 4},  //
	})
}

// TestEstimatorAppLimited: a window whose requests never filled the
// limit keeps no rate: the limit stays where the load left it.
func TestEstimatorAppLimited(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	e := NewEstimator(testConfig(), at)
	runWindows(t, e, &at, []window{
		{n: 5, rtt: 20, inflight: 2, limit: 4, estimate: 0},   // app-limited: nothing kept
		{n: 20, rtt: 20, inflight: 4, limit: 8, estimate: 4},  // full: startup doubles
		{n: 30, rtt: 20, inflight: 4, limit: 12, estimate: 6}, // admitted under the previous limit (4): kept
		{n: 5, rtt: 20, inflight: 3, limit: 12, estimate: 6},  // app-limited again: nothing changes
	})
	if e.MinRTT() != 20*time.Millisecond {
		t.Fatalf("min latency %v, want 20ms", e.MinRTT())
	}
}

// TestEstimatorWindowNeedsSamples: a window closes on its time and
// minSamples responses, whichever comes last.
func TestEstimatorWindowNeedsSamples(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	e := NewEstimator(testConfig(), t0)
	for i := range minSamples - 1 {
		e.Sample(20*time.Millisecond, 4, t0.Add(time.Duration(200+i)*time.Millisecond))
	}
	if e.Limit() != 4 || e.MinRTT() != 0 {
		t.Fatalf("a window of %d responses closed: limit %d, min %v", minSamples-1, e.Limit(), e.MinRTT())
	}
	e.Sample(20*time.Millisecond, 4, t0.Add(250*time.Millisecond))
	if e.Limit() != 4 {
		t.Fatalf("the window closed 50 ms after its first response (the idle 200 ms before it measure nothing): limit %d", e.Limit())
	}
	e.Sample(20*time.Millisecond, 4, t0.Add(300*time.Millisecond))
	// 6 responses in the 100 ms since the first: 60 r/s × 20 ms = 1.2;
	// doubled, 2.4, but startup never lowers the limit.
	if e.Limit() != 4 || e.MinRTT() != 20*time.Millisecond || !near(e.Estimate(), 1.2) {
		t.Fatalf("limit %d, min %v, estimate %v; want 4, 20ms, 1.2", e.Limit(), e.MinRTT(), e.Estimate())
	}
}

// TestEstimatorDrainLatency: after startup the latency without a queue
// is the drain window's, not the least ever seen: on a host whose
// latencies rose (30 ms where startup saw 20), the estimate follows.
func TestEstimatorDrainLatency(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	e := NewEstimator(testConfig(), at)
	runWindows(t, e, &at, []window{
		{n: 20, rtt: 20, inflight: 4, limit: 8, estimate: 4},
		{n: 40, rtt: 20, inflight: 8, limit: 16, estimate: 8},
		{n: 40, rtt: 40, inflight: 16, limit: 16, estimate: 8},
		{n: 40, rtt: 40, inflight: 16, limit: 16, estimate: 8},
		{n: 40, rtt: 40, inflight: 16, limit: 10, estimate: 8},  // startup over: probe at 5/4
		{n: 40, rtt: 50, inflight: 10, limit: 6, estimate: 8},   // drain next
		{n: 30, rtt: 30, inflight: 6, limit: 12, estimate: 12},  // the drain window: 400 r/s × 30 ms; cruise at 1.2, capped at twice the limit (6)
		{n: 40, rtt: 35, inflight: 12, limit: 14, estimate: 12}, // cruise at 1.2
	})
	if e.MinRTT() != 30*time.Millisecond {
		t.Fatalf("latency without a queue %v, want 30ms", e.MinRTT())
	}
}

// TestEstimatorFollowsCapacity: against a simulated upstream of c
// workers × 20 ms (a response per worker per 20 ms, latency growing with
// the queue), the limit settles within ±25 % of c — there for a whole
// gain cycle — within 50 windows (5 s) of each change of c.
func TestEstimatorFollowsCapacity(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	e := NewEstimator(testConfig(), at)
	for _, c := range []int{8, 4, 8, 16, 8} {
		inBand := 0
		for w := 0; ; w++ {
			if w == 50 {
				t.Fatalf("capacity %d: limit %d after 50 windows", c, e.Limit())
			}
			l := e.Limit()
			runWindows1(e, &at, 5*min(l, c), 20*max(l, c)/c, l)
			if lo, hi := 0.75*float64(c), 1.25*float64(c); float64(e.Limit()) < lo || float64(e.Limit()) > hi {
				inBand = 0
				continue
			}
			if inBand++; inBand == len(gains) {
				t.Logf("capacity %d: in [%.0f, %.0f] from window %d on", c, 0.75*float64(c), 1.25*float64(c), w+2-len(gains))
				break
			}
		}
	}
}

// runWindows1 feeds one window of n responses without checking.
func runWindows1(e *Estimator, at *time.Time, n, rtt, inflight int) {
	for j := range n {
		e.Sample(time.Duration(rtt)*time.Millisecond, inflight, at.Add(time.Duration(j+1)*100*time.Millisecond/time.Duration(n)))
	}
	*at = at.Add(100 * time.Millisecond)
}

// TestEstimatorNoisyHost: the proxy's host adds 0 to 20 ms to every
// slot's hold (scheduling delays), different each window, while the
// upstream (8 workers × 20 ms) works 20 ms per request: with L slots the
// throughput is min(L ÷ (20 ms + noise), 8 ÷ 20 ms) and a slot is held
// L ÷ throughput. The estimate takes the quietest of four drain windows
// (safe against stalls, see drains), so it provisions for a quiet
// window: the upstream must stay ≥ 70 % busy (a latency gradient falls
// to its floor here) and the limit never exceed what the noisiest window
// needs (8 × 40 ÷ 20 = 16).
func TestEstimatorNoisyHost(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	e := NewEstimator(testConfig(), at)
	noise := []float64{0, 12, 20, 5, 17, 9, 0, 20, 14, 3, 19, 7}
	const c, service = 8.0, 20.0
	busy, windows, top := 0.0, 0, 0
	var trace []int
	for w := range 200 {
		l := e.Limit()
		rate := min(float64(l)/(service+noise[w%len(noise)]), c/service) // responses per ms
		runWindows1(e, &at, int(rate*100), int(float64(l)/rate), l)
		trace = append(trace, l)
		if w >= 50 {
			busy += rate / (c / service)
			windows++
			top = max(top, l)
		}
	}
	if b := busy / float64(windows); b < 0.7 {
		t.Errorf("upstream busy %.0f %% of the time, want ≥ 70 %%; limits %v", 100*b, trace)
	}
	if top > 16 {
		t.Errorf("limit up to %d, want ≤ 16; limits %v", top, trace)
	}
	t.Logf("upstream busy %.0f %%, limit at most %d after window 50", 100*busy/float64(windows), top)
}
