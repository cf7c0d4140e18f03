package guard

import (
	"sync"
	"sync/atomic"
	"time"
)

// Circuit defaults (docs/reference/config.md, store.breaker).
const (
	// DefaultFailures is consecutive failed round trips that open the circuit.
	DefaultFailures = 5
	// DefaultCooldown is how long an open circuit refuses before it probes.
	DefaultCooldown = 500 * time.Millisecond
	// DefaultFailureRatio is the share of failed round trips in Window
	// that opens the circuit (once MinCalls were made).
	DefaultFailureRatio = 0.5
	// DefaultWindow is the sliding window of the failure ratio.
	DefaultWindow = 10 * time.Second
	// DefaultMinCalls is the round trips a window needs before its ratio counts.
	DefaultMinCalls = 20
	// DefaultProbes is the probe decisions a half-open circuit lets
	// through and judges by FailureRatio.
	DefaultProbes = 3
)

// windowBuckets is how many slices the sliding window is counted in: the
// window slides by Window/windowBuckets.
const windowBuckets = 10

// BreakerOptions configures a Circuit. The zero value uses the defaults.
type BreakerOptions struct {
	// Failures is the number of consecutive failed round trips (timeouts
	// included) that open the circuit; <= 0 means DefaultFailures (5).
	Failures int
	// Cooldown is how long the circuit stays open before it lets Probes
	// decisions through; <= 0 means DefaultCooldown (500 ms).
	Cooldown time.Duration
	// FailureRatio (0 < r <= 1) opens the circuit when that share of the
	// round trips of the last Window failed, once there were at least
	// MinCalls (resilience4j's failureRateThreshold, minimumNumberOfCalls
	// and time-based slidingWindowSize); <= 0 means DefaultFailureRatio.
	FailureRatio float64
	// Window is the ratio's sliding window; <= 0 means DefaultWindow (10 s).
	Window time.Duration
	// MinCalls is the round trips the window needs before its ratio is
	// judged; <= 0 means DefaultMinCalls (20).
	MinCalls int
	// Probes is the decisions a half-open circuit lets through; once their
	// outcomes are in it closes, unless FailureRatio of them failed, which
	// re-opens it at once; <= 0 means DefaultProbes (3). Probes whose outcome never came (their caller
	// left) are given again after another Cooldown.
	Probes int
	// Now is the clock; nil means time.Now. Only its monotonic progress
	// matters.
	Now func() time.Time
	// OnStateChange, when non-nil, is called with true when the circuit
	// opens and false when it closes again, synchronously on the goroutine
	// whose round trip caused the change, outside the circuit's lock (keep
	// it short: it is on the request path).
	OnStateChange func(open bool)
}

// Circuit is a breaker's state machine: closed (round trips counted),
// open (everything refused for Cooldown), half-open (Probes decisions let
// through). It opens on Failures consecutive failed round trips, or on a
// FailureRatio of them over the sliding Window once MinCalls were made:
// a hiccup of a few slow round trips among many does not open it, an
// outage does. The closed-state admission is one atomic load.
type Circuit struct {
	opt BreakerOptions

	closed atomic.Bool // the fast path of allow; written under mu

	mu          sync.Mutex
	consecutive int                   // failed round trips in a row (closed)
	buckets     [windowBuckets]bucket // the sliding window (closed)
	openedAt    time.Time             // open or half-open since
	half        bool                  // half-open: probing
	probesLeft  int                   // admissions left in this half-open round
	probesOK    int                   // successful probes in this half-open state
	probesBad   int                   // failed probes in this half-open state
}

// bucket counts the round trips of one slice of the window.
type bucket struct {
	slice      int64 // Window/windowBuckets-long slice number; stale if older
	ok, failed int
}

// NewCircuit returns a closed Circuit for opts.
func NewCircuit(opts BreakerOptions) *Circuit {
	if opts.Failures <= 0 {
		opts.Failures = DefaultFailures
	}
	if opts.Cooldown <= 0 {
		opts.Cooldown = DefaultCooldown
	}
	if opts.FailureRatio <= 0 {
		opts.FailureRatio = DefaultFailureRatio
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.MinCalls <= 0 {
		opts.MinCalls = DefaultMinCalls
	}
	if opts.Probes <= 0 {
		opts.Probes = DefaultProbes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Circuit{opt: opts}
	c.closed.Store(true)
	return c
}

// Up reports whether the circuit is closed.
func (c *Circuit) Up() bool { return c.closed.Load() }

// allow reports whether a decision may go to the store (ok) and whether
// it is one of a half-open circuit's probes.
func (c *Circuit) allow() (probe, ok bool) {
	if c.closed.Load() {
		return false, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return false, true
	}
	now := c.opt.Now()
	if c.half && c.probesLeft > 0 {
		c.probesLeft--
		return true, true
	}
	// Open, or half-open with every probe out: wait a Cooldown from the
	// opening or from the round's start (its probes may never report).
	if now.Sub(c.openedAt) < c.opt.Cooldown {
		return false, false
	}
	c.half, c.probesLeft, c.probesOK, c.probesBad, c.openedAt = true, c.opt.Probes-1, 0, 0, now
	return true, true
}

// unprobe gives back the probe slot of a decision whose caller left.
func (c *Circuit) unprobe() {
	c.mu.Lock()
	if c.half && !c.closed.Load() {
		c.probesLeft++
	}
	c.mu.Unlock()
}

// Record counts one round trip to the store: err nil is a success, any
// other a failure (the caller leaves out round trips whose caller gave
// up). A half-open circuit re-opens as soon as FailureRatio of its Probes
// failed, and closes once all Probes reported otherwise. Round trips reported while the
// circuit is open (sent before it opened) are ignored.
func (c *Circuit) Record(err error) {
	c.mu.Lock()
	changed, open := c.record(err)
	c.mu.Unlock()
	if changed && c.opt.OnStateChange != nil {
		c.opt.OnStateChange(open)
	}
}

// record is Record under c.mu; it reports a state change and the new state.
func (c *Circuit) record(err error) (changed, open bool) {
	now := c.opt.Now()
	switch {
	case c.closed.Load():
		if !c.count(now, err != nil) {
			return false, false
		}
		c.closed.Store(false)
		c.openedAt, c.half = now, false
		return true, true
	case !c.half:
		return false, false
	}
	// Half-open: judge the probes as resilience4j does, by the failure
	// ratio of the Probes of this round (a stale connection's single
	// failure among them does not keep the store shut).
	if err != nil {
		c.probesBad++
	} else {
		c.probesOK++
	}
	if float64(c.probesBad) >= c.opt.FailureRatio*float64(c.opt.Probes) { // open for another Cooldown
		c.openedAt, c.half = now, false
		return false, false
	}
	if c.probesOK+c.probesBad < c.opt.Probes {
		return false, false
	}
	c.consecutive, c.buckets, c.half = 0, [windowBuckets]bucket{}, false
	c.closed.Store(true)
	return true, false
}

// count adds one round trip at now to the closed circuit's counts and
// reports whether they now call for opening.
func (c *Circuit) count(now time.Time, failed bool) bool {
	slice := int64(c.opt.Window / windowBuckets)
	cur := now.UnixNano() / max(slice, 1)
	b := &c.buckets[cur%windowBuckets]
	if b.slice != cur {
		*b = bucket{slice: cur}
	}
	if !failed {
		b.ok++
		c.consecutive = 0
		return false
	}
	b.failed++
	c.consecutive++
	if c.consecutive >= c.opt.Failures {
		return true
	}
	var ok, bad int
	for _, b := range c.buckets {
		if cur-b.slice < windowBuckets {
			ok, bad = ok+b.ok, bad+b.failed
		}
	}
	return ok+bad >= c.opt.MinCalls && float64(bad) >= c.opt.FailureRatio*float64(ok+bad)
}
