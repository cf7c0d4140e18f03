// Package adaptive limits the requests in flight to one upstream by a
// limit that follows what the upstream delivers, and queues the requests
// over it by priority class, fairly across clients (deficit round robin),
// shedding the lowest class over its share when the queue is full.
//
// The estimator is a delivery-rate one (Little's law, as TCP BBR's
// bottleneck estimate): the upstream's concurrency is its best recent
// throughput times its minimum latency to the response head. A latency
// gradient (Envoy's adaptive concurrency filter, Netflix
// concurrency-limits' Gradient2) was tried first and collapsed to its
// floor on a CPU-starved host, where every latency drifts up while the
// upstream has room; throughput and minimum latency, both filtered to
// their best recent value, do not drift with it (docs/reference/overload.md).
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
	DefaultTolerance     = 0.2
	DefaultProbeInterval = 10 * time.Second
	DefaultQueueTimeout  = 500 * time.Millisecond

	// minSamples is how many responses close a window at the earliest:
	// one response's latency is noise.
	minSamples = 5
	// maxSamples bounds a window's latency samples (later ones overwrite
	// earlier ones in turn).
	maxSamples = 512
	// rateWindows is how many windows the best throughput is kept for:
	// after a capacity drop the limit follows within as many windows.
	rateWindows = 10
	// startupGrowth is the throughput growth a startup window must show
	// (BBR's 25 %), startupStalls how many in a row without it end startup.
	startupGrowth = 1.25
	startupStalls = 3
)

// gains is the steady state's cycle of limit gains over the estimated
// concurrency, one window each (BBR's ProbeBW): a window at 5/4 finds
// capacity the upstream gained, one at 3/4 drains the queue the probe
// built (and shows the minimum latency again), six cruise at
// 1 + Tolerance (the cruise gain replaces the 1 here).
var gains = [...]float64{1.25, 0.75, 1, 1, 1, 1, 1, 1}

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
	// a fraction (0.2 = 20 %): the proxy holds a slot a little longer
	// than the upstream works on the request.
	Tolerance float64
	// ProbeInterval is how long a minimum latency is trusted: the
	// minimum is taken over the windows of the last ProbeInterval, so a
	// slower upstream is believed after it.
	ProbeInterval time.Duration
	// QueueTimeout is the longest a request waits for a slot (bounded
	// further by server.max_wait); the queue holds what drains in it.
	QueueTimeout time.Duration
	// Shadow computes and reports the limit but never queues or sheds.
	Shadow bool
}

// rttAt is one window's median latency and when it closed.
type rttAt struct {
	at  time.Time
	rtt time.Duration
}

// Estimator computes a concurrency limit from the responses of one
// upstream. It is not safe for concurrent use: Gate holds its lock
// around every call.
type Estimator struct {
	cfg     Config
	limit   float64
	prev    int     // the limit of the previous window: some of this window's responses were admitted under it
	bdp     float64 // estimated concurrency: best rate × minimum latency
	samples []time.Duration
	seen    int // responses this window (≥ len(samples))
	peak    int // most requests in flight at an admission this window
	start   time.Time

	rates    [rateWindows]float64 // delivery rates (responses/s) of the last windows not app-limited
	nextRate int
	rtts     []rttAt // medians of the windows of the last ProbeInterval
	minRTT   time.Duration
	rtt      time.Duration // the last window's median

	startup bool
	best    float64 // startup: the best rate when it last grew by startupGrowth
	stalls  int
	cycle   int // steady state: index in gains
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

// MinRTT returns the minimum latency of the last ProbeInterval (0 before
// the first window closed).
func (e *Estimator) MinRTT() time.Duration { return e.minRTT }

// RTT returns the last window's median latency (0 before one closed).
func (e *Estimator) RTT() time.Duration { return e.rtt }

// Sample records one response's latency to its head at now; inflight is
// how many requests were in flight when it was admitted, itself
// included. It reports whether the limit changed.
func (e *Estimator) Sample(rtt time.Duration, inflight int, now time.Time) bool {
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
	// the minimum latency. Its responses were admitted under its limit or
	// the previous window's.
	filled := e.peak >= min(before, e.prev)
	rate := float64(e.seen) / elapsed.Seconds()
	e.prev = before
	e.samples, e.seen, e.peak, e.start = e.samples[:0], 0, 0, now
	e.rtt = rtt
	e.noteRTT(rtt, now)
	if !filled {
		return false
	}
	e.rates[e.nextRate%rateWindows] = rate
	e.nextRate++
	e.update()
	return e.Limit() != before
}

// noteRTT adds a window's median to the minimum filter and drops those
// older than ProbeInterval.
func (e *Estimator) noteRTT(rtt time.Duration, now time.Time) {
	keep := e.rtts[:0]
	for _, r := range e.rtts {
		if now.Sub(r.at) < e.cfg.ProbeInterval {
			keep = append(keep, r)
		}
	}
	e.rtts = append(keep, rttAt{at: now, rtt: rtt})
	e.minRTT = rtt
	for _, r := range e.rtts {
		e.minRTT = min(e.minRTT, r.rtt)
	}
}

// update sets the limit from the best kept rate and the minimum latency:
// twice the estimate in startup, the gain cycle's share of it after.
func (e *Estimator) update() {
	rate := 0.0
	for _, r := range e.rates {
		rate = max(rate, r)
	}
	e.bdp = rate * e.minRTT.Seconds()
	var next float64
	if e.startup {
		if rate >= e.best*startupGrowth {
			e.best, e.stalls = rate, 0
		} else if e.stalls++; e.stalls >= startupStalls {
			e.startup = false
		}
		next = 2 * e.bdp
	}
	if !e.startup {
		g := gains[e.cycle%len(gains)]
		if g == 1 {
			g += e.cfg.Tolerance
		}
		e.cycle++
		next = g * e.bdp
	}
	e.limit = min(max(next, float64(e.cfg.Min)), float64(e.cfg.Max))
}

// median returns the middle sample (the upper one of an even count); it
// reorders s.
func median(s []time.Duration) time.Duration {
	slices.Sort(s)
	return s[len(s)/2]
}
