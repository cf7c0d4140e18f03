package adaptive

import (
	"testing"
	"time"
)

// window is one estimator step: samples of rtt ms from requests admitted
// at inflight, the last one at ms (closing the window), and the limit
// and estimate that must follow.
type window struct {
	at, rtt, inflight int
	limit             int
	estimate          float64
}

func runWindows(t *testing.T, e *Estimator, t0 time.Time, steps []window) {
	t.Helper()
	for i, s := range steps {
		for j := range minSamples {
			e.Sample(time.Duration(s.rtt)*time.Millisecond, s.inflight, t0.Add(time.Duration(s.at-10+j)*time.Millisecond))
		}
		e.Sample(time.Duration(s.rtt)*time.Millisecond, s.inflight, t0.Add(time.Duration(s.at)*time.Millisecond))
		if got, est := e.Limit(), e.Estimate(); got != s.limit || (est-s.estimate) > 1e-9 || (s.estimate-est) > 1e-9 {
			t.Fatalf("step %d (t=%d ms, rtt %d ms): limit %d, estimate %.4f; want %d, %.4f", i, s.at, s.rtt, got, est, s.limit, s.estimate)
		}
	}
}

func testConfig() Config {
	return Config{Min: 1, Max: 20, Initial: 4, Window: 100 * time.Millisecond, Tolerance: 0.1,
		Smoothing: 1, ProbeInterval: time.Hour, QueueTimeout: time.Second}
}

func TestEstimatorSteps(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	e := NewEstimator(testConfig(), t0)
	runWindows(t, e, t0, []window{
		{at: 100, rtt: 20, inflight: 4, limit: 8, estimate: 8},        // slow start doubles
		{at: 200, rtt: 20, inflight: 8, limit: 16, estimate: 16},      // and again
		{at: 300, rtt: 40, inflight: 16, limit: 8, estimate: 8.8},     // latency rose: 16 × 22/40, slow start over
		{at: 400, rtt: 20, inflight: 8, limit: 9, estimate: 9.68},     // × 1.1 at the minimum
		{at: 500, rtt: 20, inflight: 2, limit: 9, estimate: 9.68},     // app-limited: not raised
		{at: 600, rtt: 100, inflight: 9, limit: 4, estimate: 4.84},    // gradient floored at 0.5
		{at: 700, rtt: 22, inflight: 4, limit: 4, estimate: 4.84},     // at the target exactly: unchanged
		{at: 800, rtt: 11, inflight: 4, limit: 5, estimate: 5.324},    // faster than ever: the new minimum, × 1.1
		{at: 900, rtt: 1000, inflight: 5, limit: 2, estimate: 2.662},  // gradient floored at 0.5
		{at: 1000, rtt: 1000, inflight: 2, limit: 1, estimate: 1.331}, //
		{at: 1100, rtt: 1000, inflight: 1, limit: 1, estimate: 1},     // the floor
	})
}

func TestEstimatorCeilingAndSmoothing(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	cfg := testConfig()
	cfg.Smoothing = 0.5
	e := NewEstimator(cfg, t0)
	runWindows(t, e, t0, []window{
		{at: 100, rtt: 10, inflight: 4, limit: 8, estimate: 8},      // slow start is not smoothed
		{at: 200, rtt: 10, inflight: 8, limit: 16, estimate: 16},    //
		{at: 300, rtt: 10, inflight: 16, limit: 20, estimate: 20},   // the ceiling
		{at: 400, rtt: 20, inflight: 20, limit: 15, estimate: 15.5}, // 20 × 11/20 = 11, half way: 15.5
		{at: 500, rtt: 20, inflight: 15, limit: 12, estimate: 12.0125},
	})
}

func TestEstimatorWindowNeedsSamples(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	e := NewEstimator(testConfig(), t0)
	for i := range minSamples - 1 {
		e.Sample(20*time.Millisecond, 4, t0.Add(time.Duration(200+i)*time.Millisecond))
	}
	if e.Limit() != 4 || e.MinRTT() != 0 {
		t.Fatalf("a window of %d samples closed: limit %d, min %v", minSamples-1, e.Limit(), e.MinRTT())
	}
	e.Sample(20*time.Millisecond, 4, t0.Add(300*time.Millisecond))
	if e.Limit() != 8 || e.MinRTT() != 20*time.Millisecond {
		t.Fatalf("limit %d, min %v; want 8, 20ms", e.Limit(), e.MinRTT())
	}
}

func TestEstimatorProbe(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	cfg := testConfig()
	cfg.ProbeInterval = 250 * time.Millisecond
	cfg.Min = 2
	e := NewEstimator(cfg, t0)
	runWindows(t, e, t0, []window{
		{at: 100, rtt: 20, inflight: 4, limit: 8, estimate: 8},
		{at: 200, rtt: 20, inflight: 8, limit: 16, estimate: 16},
		{at: 300, rtt: 24, inflight: 16, limit: 2, estimate: 14.666666666666666}, // 16 × 22/24; the probe starts: limit = min
	})
	// Requests admitted above min during the probe do not count.
	for i := range 10 {
		e.Sample(50*time.Millisecond, 3, t0.Add(time.Duration(400+i)*time.Millisecond))
	}
	if e.Limit() != 2 {
		t.Fatalf("probe ended on samples of requests admitted above min: limit %d", e.Limit())
	}
	for i := range minSamples {
		e.Sample(30*time.Millisecond, 2, t0.Add(time.Duration(410+i)*time.Millisecond))
	}
	if e.Limit() != 14 || e.MinRTT() != 30*time.Millisecond {
		t.Fatalf("after the probe: limit %d, min %v; want 14 (restored), 30ms (the new minimum)", e.Limit(), e.MinRTT())
	}
	// A probe that gathers nothing ends after probeTimeout, the minimum kept.
	runWindows(t, e, t0, []window{{at: 700, rtt: 33, inflight: 14, limit: 2, estimate: 14.666666666666666}})
	e.Tick(t0.Add(700*time.Millisecond + probeTimeout))
	if e.Limit() != 14 || e.MinRTT() != 30*time.Millisecond {
		t.Fatalf("after an empty probe: limit %d, min %v; want 14, 30ms", e.Limit(), e.MinRTT())
	}
}

func TestEstimatorShadowNeverProbes(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	cfg := testConfig()
	cfg.ProbeInterval, cfg.Shadow = time.Millisecond, true
	e := NewEstimator(cfg, t0)
	runWindows(t, e, t0, []window{
		{at: 100, rtt: 20, inflight: 4, limit: 8, estimate: 8},
		{at: 200, rtt: 20, inflight: 8, limit: 16, estimate: 16},
	})
}
