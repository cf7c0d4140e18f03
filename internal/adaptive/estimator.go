// Package adaptive limits the requests in flight to one upstream by a
// limit that follows what the upstream delivers, and queues the requests
// over it by priority class, fairly across clients (deficit round robin),
// shedding the lowest class over its share when the queue is full.
//
// The estimator is a delivery-rate one (Little's law, as TCP BBR's
// bottleneck estimate): the upstream's concurrency is its best recent
// throughput times its latency without a queue, measured in the drain
// window of a gain cycle. A latency gradient (Envoy's adaptive
// concurrency filter, Netflix concurrency-limits' Gradient2) was tried
// first and collapsed to its floor on a CPU-starved host, where every
// latency drifts up while the upstream has room (docs/reference/overload.md).
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
	DefaultMin          = 1
	DefaultMax          = 1000
	DefaultInitial      = 10
	DefaultWindow       = 100 * time.Millisecond
	DefaultTolerance    = 0.1
	DefaultQueueTimeout = 500 * time.Millisecond

	// minSamples is how many responses close a window at the earliest:
	// one response's latency is noise.
	minSamples = 5
	// maxSamples bounds a window's latency samples (later ones overwrite
	// earlier ones in turn).
	maxSamples = 512
	// rateWindows is how many windows the best throughput is kept for:
	// after a capacity drop the limit follows within as many windows.
	rateWindows = 10
	// drains is how many drain windows' latencies (four gain cycles, 3.2 s
	// at the default window) the estimate takes the least of: a stall of
	// the host during a drain window inflates its median many times, and
	// an inflated latency lets the limit run far past the upstream's
	// capacity (its own queue grows) before later cycles bring it back.
	// The least errs the other way on a noisy host: fewer slots than a
	// noisy window needs (TestEstimatorNoisyHost).
	drains = 4
	// maxGrowth bounds how much one window may raise the limit (Envoy's
	// gradient is capped at 2 likewise).
	maxGrowth = 2
	// startupGrowth is the throughput growth a startup window must show
	// (BBR's 25 %), startupStalls how many in a row without it end startup.
	startupGrowth = 1.25
	startupStalls = 3
	// drainGain is the gain of the cycle's drain window.
	drainGain = 0.75
)

// gains is the steady state's cycle of limit gains over the estimated
// concurrency, one window each (BBR's ProbeBW): a window at 5/4 finds
// capacity the upstream gained, one at 3/4 drains the queue the probe
// built and measures the latency without a queue, six cruise at
// 1 + Tolerance (the cruise gain replaces the 1 here).
var gains = [...]float64{1.25, drainGain, 1, 1, 1, 1, 1, 1}

// Config is one upstream's adaptive_concurrency (config.AdaptiveConcurrency).
type Config struct {
	// Min and Max bound the limit (requests in flight); 1 ≤ Min ≤ Max.
	Min, Max int
	// Initial is the limit a new Gate starts at, in [Min, Max]; startup
	// doubles it each window while throughput grows.
	Initial int
	// Window is how often the limit is recomputed (once at least
	// minSamples responses were measured in it).
	Window time.Duration
	// Tolerance is the cruising headroom over the estimated concurrency,
	// a fraction (0.1 = 10 %).
	Tolerance float64
	// QueueTimeout is the longest a request waits for a slot (bounded
	// further by server.max_wait); the queue holds what drains in it.
	QueueTimeout time.Duration
	// Shadow computes and reports the limit but never queues or sheds.
	Shadow bool
}

// Estimator computes a concurrency limit from the responses of one
// upstream. It is not safe for concurrent use: Gate holds its lock
// around every call.
type Estimator struct {
	cfg     Config
	limit   float64
	prev    int     // the limit of the previous window: some of this window's responses were admitted under it
	gain    float64 // the gain in force this window (0 in startup)
	bdp     float64 // estimated concurrency: best rate × latency without a queue
	samples []time.Duration
	seen    int // responses this window (≥ len(samples))
	peak    int // most requests in flight at an admission this window
	start   time.Time

	rates    [rateWindows]float64 // delivery rates (responses/s) of the last windows not app-limited
	nextRate int
	drained  [drains]time.Duration // medians of the last drain windows (0: none yet)
	nextDrn  int
	minRTT   time.Duration // startup: the least window median
	rtt      time.Duration // the last window's median

	startup bool
	best    float64 // startup: the best rate when it last grew by startupGrowth
	stalls  int
	cycle   int // steady state: index in gains of the next window
}

// NewEstimator returns an estimator at cfg.Initial, in startup, whose
// first window opens at now.
func NewEstimator(cfg Config, now time.Time) *Estimator {
	return &Estimator{cfg: cfg, limit: float64(cfg.Initial), prev: cfg.Initial, startup: true,
		samples: make([]time.Duration, 0, maxSamples), start: now}
}

// Limit returns the requests that may be in flight now: the estimate
// rounded down, never below Min.
func (e *Estimator) Limit() int { return max(int(e.limit), e.cfg.Min) }

// Estimate returns the estimated concurrency of the upstream (requests,
// fractional; 0 before the first window closed).
func (e *Estimator) Estimate() float64 { return e.bdp }

// MinRTT returns the latency without a queue the estimate uses: the
// least of the last drain windows' medians, or before any drain window
// the least window median (0 before the first window closed).
func (e *Estimator) MinRTT() time.Duration {
	d := time.Duration(0)
	for _, r := range e.drained {
		if r > 0 && (d == 0 || r < d) {
			d = r
		}
	}
	if d == 0 {
		return e.minRTT
	}
	return d
}

// RTT returns the last window's median latency (0 before one closed).
func (e *Estimator) RTT() time.Duration { return e.rtt }

// Sample records one response's latency at now; inflight is how many
// requests were in flight when it was admitted, itself included. It
// reports whether the limit changed.
func (e *Estimator) Sample(rtt time.Duration, inflight int, now time.Time) bool {
	if e.seen == 0 && now.Sub(e.start) >= e.cfg.Window {
		e.start = now // an idle stretch before it measures nothing
	}
	e.peak = max(e.peak, inflight)
	if len(e.samples) < maxSamples {
		e.samples = append(e.samples, rtt)
	} else {
		e.samples[e.seen%maxSamples] = rtt
	}
	e.seen++
	return e.Tick(now)
}

// Tick closes the window if it is over at now and has minSamples
// responses, and recomputes the limit; it reports whether the limit
// changed.
func (e *Estimator) Tick(now time.Time) bool {
	elapsed := now.Sub(e.start)
	if elapsed < e.cfg.Window || e.seen < minSamples {
		return false
	}
	before := e.Limit()
	rtt := median(e.samples)
	// A window whose requests never filled the limit measured the load,
	// not the upstream (BBR's app-limited rule): it changes nothing but
	// the latencies. Its responses were admitted under its limit or the
	// previous window's.
	filled := e.peak >= min(before, e.prev)
	rate := float64(e.seen) / elapsed.Seconds()
	e.prev = before
	e.samples, e.seen, e.peak, e.start = e.samples[:0], 0, 0, now
	e.rtt = rtt
	if e.minRTT == 0 || rtt < e.minRTT {
		e.minRTT = rtt
	}
	if e.gain == drainGain {
		e.drained[e.nextDrn%drains] = rtt
		e.nextDrn++
	}
	if !filled {
		return false
	}
	e.rates[e.nextRate%rateWindows] = rate
	e.nextRate++
	e.update()
	return e.Limit() != before
}

// update sets the limit from the best kept rate and the latency without
// a queue: twice the estimate in startup (never lower), the gain cycle's
// share of it after. Using the drain windows' latency, not the least ever seen, keeps
// the estimate in step with the host's own noise: on a busy host every
// latency is higher than the best one, and a best-ever minimum would
// shrink the limit below what keeps the upstream busy.
func (e *Estimator) update() {
	rate := 0.0
	for _, r := range e.rates {
		rate = max(rate, r)
	}
	e.bdp = rate * e.MinRTT().Seconds()
	var next float64
	if e.startup {
		if rate >= e.best*startupGrowth {
			e.best, e.stalls = rate, 0
		} else if e.stalls++; e.stalls >= startupStalls {
			e.startup = false
		}
		// Startup only grows: its latency is the best seen, which a busy
		// host's typical one exceeds, so its estimate runs low.
		next = max(2*e.bdp, e.limit)
	}
	e.gain = 0
	if !e.startup {
		e.gain = gains[e.cycle%len(gains)]
		e.cycle++
		switch g := e.gain; {
		case g == 1:
			next = (1 + e.cfg.Tolerance) * e.bdp
		case g > 1: // at least one more slot, or a small limit never probes
			next = max(g*e.bdp, e.bdp+1)
		default:
			next = g * e.bdp
		}
		next = min(next, maxGrowth*e.limit)
	}
	e.limit = min(max(next, float64(e.cfg.Min)), float64(e.cfg.Max))
}

// median returns the middle sample (the upper one of an even count); it
// reorders s.
func median(s []time.Duration) time.Duration {
	slices.Sort(s)
	return s[len(s)/2]
}
