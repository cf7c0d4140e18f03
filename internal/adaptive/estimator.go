// Package adaptive limits the requests in flight to one upstream by a
// limit that follows the upstream's latency (a gradient estimator, as
// Envoy's adaptive concurrency filter and Netflix concurrency-limits'
// Gradient2), and queues the requests over it by priority class, fairly
// across clients (deficit round robin), shedding the lowest class over its
// share when the queue is full.
//
// Time is injected: every method takes the instant it acts at, so tests
// step a clock instead of sleeping. One Gate serves one upstream on one
// instance; a fleet of N instances each learns its own limit.
package adaptive

import (
	"slices"
	"time"
)

// Defaults of Config's fields (docs/reference/overload.md explains them).
const (
	DefaultMin           = 1
	DefaultMax           = 1000
	DefaultInitial       = 10
	DefaultWindow        = 100 * time.Millisecond
	DefaultTolerance     = 0.1
	DefaultSmoothing     = 0.5
	DefaultProbeInterval = 10 * time.Second
	DefaultQueueTimeout  = 500 * time.Millisecond
	// minSamples is how many latency samples close a window at the
	// earliest: one sample's median is noise.
	minSamples = 5
	// maxSamples bounds a window's samples (later ones overwrite at
	// random places, keeping the median unbiased enough).
	maxSamples = 512
	// probeTimeout ends a minimum-latency probe that gathers no samples.
	probeTimeout = time.Second
)

// Config is one upstream's adaptive_concurrency (config.AdaptiveConcurrency).
type Config struct {
	// Min and Max bound the limit (requests in flight); 1 ≤ Min ≤ Max.
	Min, Max int
	// Initial is the limit a new Gate starts at, in [Min, Max].
	Initial int
	// Window is how often the limit is recomputed from the latencies
	// measured since the last time (at least minSamples of them).
	Window time.Duration
	// Tolerance is how much slower than the minimum latency (a fraction:
	// 0.1 = 10 %) the median may be before the limit shrinks; the limit
	// settles near (1 + Tolerance) × the upstream's own concurrency.
	Tolerance float64
	// Smoothing in (0, 1] is how far each window moves the limit towards
	// its new value (1 = all the way).
	Smoothing float64
	// ProbeInterval is how often the limit drops to Min for one window to
	// measure the upstream's minimum latency afresh (Envoy's min RTT
	// recalculation): a stale minimum would let the limit creep up.
	ProbeInterval time.Duration
	// QueueTimeout is the longest a request waits for a slot (bounded
	// further by server.max_wait); the queue holds what drains in it.
	QueueTimeout time.Duration
	// Shadow computes and reports the limit but never queues or sheds.
	Shadow bool
}

// Estimator computes a concurrency limit from latency samples. It is not
// safe for concurrent use: Gate holds its lock around every call.
type Estimator struct {
	cfg       Config
	limit     float64
	minRTT    time.Duration // 0 until the first window closes
	rtt       time.Duration // the last window's median (0 before one closed)
	slowStart bool          // doubling each window until latency rises
	samples   []time.Duration
	seen      int // samples offered this window (≥ len(samples))
	peak      int // most requests in flight this window
	start     time.Time
	nextProbe time.Time
	probing   bool
	saved     float64 // the limit before a probe
}

// NewEstimator returns an estimator at cfg.Initial, in slow start, whose
// first window opens at now.
func NewEstimator(cfg Config, now time.Time) *Estimator {
	return &Estimator{cfg: cfg, limit: float64(cfg.Initial), slowStart: true,
		samples: make([]time.Duration, 0, maxSamples), start: now, nextProbe: now.Add(cfg.ProbeInterval)}
}

// Limit returns the requests that may be in flight now: Min during a
// probe, else the estimate rounded down, never below Min.
func (e *Estimator) Limit() int {
	if e.probing {
		return e.cfg.Min
	}
	return max(int(e.limit), e.cfg.Min)
}

// Estimate returns the estimate itself (requests, fractional), which a
// probe does not change.
func (e *Estimator) Estimate() float64 {
	if e.probing {
		return e.saved
	}
	return e.limit
}

// MinRTT returns the minimum latency measured (0 before the first window).
func (e *Estimator) MinRTT() time.Duration { return e.minRTT }

// RTT returns the last window's median latency (0 before the first window).
func (e *Estimator) RTT() time.Duration { return e.rtt }

// Sample records one response's latency (time to its head) at now;
// inflight is how many requests were in flight when it was admitted,
// itself included. During a probe only requests admitted at or under Min
// count: the others queued behind the load the probe is draining. It
// reports whether the limit changed.
func (e *Estimator) Sample(rtt time.Duration, inflight int, now time.Time) bool {
	if !e.probing || inflight <= e.cfg.Min {
		e.peak = max(e.peak, inflight)
		if len(e.samples) < maxSamples {
			e.samples = append(e.samples, rtt)
		} else {
			e.samples[e.seen%maxSamples] = rtt
		}
		e.seen++
	}
	return e.Tick(now)
}

// Tick closes the window if it is over at now and recomputes the limit;
// it reports whether the limit changed. A probe that gathered nothing for
// probeTimeout ends without a new minimum.
func (e *Estimator) Tick(now time.Time) bool {
	if now.Sub(e.start) < e.cfg.Window {
		return false
	}
	if len(e.samples) < minSamples {
		if e.probing && now.Sub(e.start) >= probeTimeout {
			e.endProbe(now, 0)
			return true
		}
		return false
	}
	before := e.Limit()
	rtt := median(e.samples)
	peak := e.peak
	e.rtt = rtt
	e.samples, e.seen, e.peak, e.start = e.samples[:0], 0, 0, now
	if e.probing {
		e.endProbe(now, rtt)
		return e.Limit() != before
	}
	e.update(rtt, peak)
	if !e.cfg.Shadow && !now.Before(e.nextProbe) {
		e.probing, e.saved = true, e.limit
	}
	return e.Limit() != before
}

// endProbe restores the limit a probe saved and takes rtt (if any) as
// the new minimum latency.
func (e *Estimator) endProbe(now time.Time, rtt time.Duration) {
	e.probing, e.limit = false, e.saved
	if rtt > 0 {
		e.minRTT = rtt
	}
	e.samples, e.seen, e.peak, e.start = e.samples[:0], 0, 0, now
	e.nextProbe = now.Add(e.cfg.ProbeInterval)
}

// update moves the limit by the gradient (1 + Tolerance) × minRTT / rtt,
// clamped to [0.5, 2] as Envoy's; in slow start it doubles while the
// median stays within tolerance. A window whose requests never reached
// half the limit (the load, not the upstream, was the bound) does not
// raise it, as Gradient2's app-limited rule.
func (e *Estimator) update(rtt time.Duration, peak int) {
	if e.minRTT == 0 || rtt < e.minRTT {
		e.minRTT = rtt
	}
	target := float64(e.minRTT) * (1 + e.cfg.Tolerance)
	gradient := min(max(target/float64(rtt), 0.5), 2)
	next := e.limit * gradient
	if e.slowStart {
		if float64(rtt) <= target {
			next = e.limit * 2
		} else {
			e.slowStart = false
		}
	}
	if next > e.limit && float64(peak) < e.limit/2 {
		return
	}
	if !e.slowStart {
		next = e.limit + (next-e.limit)*e.cfg.Smoothing
	}
	e.limit = min(max(next, float64(e.cfg.Min)), float64(e.cfg.Max))
}

// median returns the middle sample (the upper one of an even count); it
// reorders s.
func median(s []time.Duration) time.Duration {
	slices.Sort(s)
	return s[len(s)/2]
}
