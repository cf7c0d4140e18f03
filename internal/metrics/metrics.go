// Package metrics holds rlproxy's Prometheus collectors in one Metrics value
// registered on a caller-supplied registry: no package-level state, no default
// registry, so tests and reloads never collide.
//
// Contract (docs/CONTRACT.md "Metrics"): rlproxy_requests_total counts each
// request once per policy of its route, labelled by route, policy and decision.
// No metric carries a per-client label: one series per client would let
// traffic grow the scrape without bound (see caddy-ratelimit).
//
// The request path resolves its counters once per (route, policy) when a
// config is compiled (PolicyCounters, UpstreamErrors) and then only calls
// Inc/Observe, which do not allocate.
package metrics

import (
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Decision label values of rlproxy_requests_total (docs/CONTRACT.md "Metrics").
const (
	DecisionAllowed        = "allowed"          // this policy passed the request at once
	DecisionDelayed        = "delayed"          // passed after a leaky-bucket wait
	DecisionRejected       = "rejected"         // this policy refused
	DecisionNotCharged     = "not_charged"      // another policy of the route refused
	DecisionDryRunRejected = "dry_run_rejected" // would have refused; dry_run let it pass
	DecisionStoreError     = "store_error"      // the store could not decide; on_store_error applied
)

// Metrics is rlproxy's set of collectors. All methods are safe for concurrent
// use. Build it with New.
type Metrics struct {
	reg *prometheus.Registry

	requests       *prometheus.CounterVec
	upstreamErrors *prometheus.CounterVec

	storeUp          prometheus.Gauge
	storeErrors      prometheus.Counter
	decisionDuration prometheus.Histogram
	storeDuration    prometheus.Histogram
	delay            prometheus.Histogram
	waiting          prometheus.Gauge
	waitingLimit     prometheus.Gauge
	breakerOpen      prometheus.Gauge
	localRefusals    prometheus.Counter
	shapingRefusals  *prometheus.CounterVec

	reloadSuccess prometheus.Counter
	reloadFailure prometheus.Counter
	lastReload    prometheus.Gauge

	memory *memoryCollector
	allot  *allotmentCollector

	traffic           *traffic // traffic.go
	cleanupErrors     *prometheus.CounterVec
	costHeaderInvalid *prometheus.CounterVec
	adaptive          *adaptiveCollector
	store             *storeMetrics          // store.go
	proxyErrors       *prometheus.CounterVec // proxy.go
	badRequests       *prometheus.CounterVec // badrequest.go
	control           *controlMetrics        // control.go
	controlChanges    *prometheus.CounterVec // controlapi.go
}

// Discard returns a Metrics registered on a registry of its own that
// nothing scrapes: what a component counts into when its caller has no
// registry (metrics off, a unit test), so that no call site checks for nil.
func Discard() *Metrics { return New(prometheus.NewRegistry(), "") }

// New builds the collectors and registers them, with the Go runtime and
// process collectors, on reg, which also serves them through Handler. version
// is reported by rlproxy_build_info. It panics if reg already holds
// collectors of the same names (a programming error: one Metrics per registry).
func New(reg *prometheus.Registry, version string) *Metrics {
	m := &Metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rlproxy_requests_total",
			Help: "Requests decided, once per policy of the matched route, by decision.",
		}, []string{"route", "policy", "decision"}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rlproxy_upstream_errors_total",
			Help: "Proxied requests that failed to reach the upstream or get its response (answered 502).",
		}, []string{"route"}),
		storeUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rlproxy_store_up",
			Help: "1 if the last store round trip succeeded, 0 if it failed.",
		}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rlproxy_store_errors_total",
			Help: "Store round trips that failed or timed out.",
		}),
		decisionDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rlproxy_decision_duration_seconds",
			Help: "Time to decide one request against all its policies, store round trip included.",
			// 50 µs (memory store) to 2.5 s (past the default store
			// timeout, a loaded proxy's queueing included).
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		storeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "rlproxy_store_duration_seconds",
			Help:    "Time of one store round trip (Decide or Release).",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rlproxy_delay_seconds",
			Help: "Leaky-bucket shaping waits of delayed requests.",
			// Up to server.max_wait's default of 30 s.
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30},
		}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rlproxy_waiting_requests",
			Help: "Requests currently held in a leaky-bucket delay.",
		}),
		waitingLimit: newWaitingLimit(),
		breakerOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rlproxy_breaker_open",
			Help: "1 while the store circuit breaker is open (store skipped, fail modes applied), else 0.",
		}),
		localRefusals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rlproxy_local_refusals_total",
			Help: "Requests refused from the local over-limit cache without asking the store.",
		}),
		shapingRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rlproxy_shaping_refusals_total",
			Help: "Requests the policies accepted with a wait that were refused by a shaping cap (server.max_wait, server.max_waiting); their charge was refunded.",
		}, []string{"route", "cap"}),
		lastReload: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rlproxy_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful config load.",
		}),
		allot: newAllotmentCollector(),
		memory: &memoryCollector{
			keys: prometheus.NewDesc("rlproxy_memory_store_keys",
				"Keys held by the in-process store.", nil, nil),
			evictions: prometheus.NewDesc("rlproxy_memory_store_evictions_total",
				"Keys evicted from the in-process store by its max_keys LRU bound.", nil, nil),
		},
	}
	m.cleanupErrors = newCleanupErrors()
	m.costHeaderInvalid = newCostHeaderInvalid()
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rlproxy_config_reloads_total",
		Help: "Config reloads by result; a failed one keeps the running config.",
	}, []string{"result"})
	m.reloadSuccess = reloads.WithLabelValues("success")
	m.reloadFailure = reloads.WithLabelValues("failure")

	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rlproxy_build_info",
		Help: "Always 1; labels give the rlproxy version and the Go version that built it.",
	}, []string{"version", "goversion"})
	buildInfo.WithLabelValues(version, runtime.Version()).Set(1)
	m.proxyErrors = newProxyErrors()

	m.store = newStoreMetrics(reg)
	m.badRequests = newBadRequests(reg)
	m.control = newControlMetrics(reg)
	m.controlChanges = newControlChanges(reg)
	m.adaptive = newAdaptiveCollector(reg)
	reg.MustRegister(
		m.requests, m.upstreamErrors, m.storeUp, m.storeErrors,
		m.decisionDuration, m.storeDuration, m.delay, m.waiting, m.waitingLimit, m.breakerOpen,
		m.localRefusals, m.shapingRefusals, reloads, m.lastReload, buildInfo, m.memory, m.allot,
		m.cleanupErrors, m.costHeaderInvalid, m.proxyErrors,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.traffic = newTraffic(reg)
	return m
}

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// PolicyCounters are one (route, policy) pair's rlproxy_requests_total
// series, one per decision. Resolve them once per compiled config and keep
// them: Inc on a field does not allocate.
type PolicyCounters struct {
	Allowed        prometheus.Counter
	Delayed        prometheus.Counter
	Rejected       prometheus.Counter
	NotCharged     prometheus.Counter
	DryRunRejected prometheus.Counter
	StoreError     prometheus.Counter
}

// PolicyCounters returns the counters of policy on route, creating the six
// series at 0 so rate() sees them before the first request. Calling it again
// with the same names returns the same series (a reload keeps the counts).
func (m *Metrics) PolicyCounters(route, policy string) *PolicyCounters {
	c := func(decision string) prometheus.Counter {
		return m.requests.WithLabelValues(route, policy, decision)
	}
	return &PolicyCounters{
		Allowed:        c(DecisionAllowed),
		Delayed:        c(DecisionDelayed),
		Rejected:       c(DecisionRejected),
		NotCharged:     c(DecisionNotCharged),
		DryRunRejected: c(DecisionDryRunRejected),
		StoreError:     c(DecisionStoreError),
	}
}

// UpstreamErrors returns route's rlproxy_upstream_errors_total series, created
// at 0. Resolve it once per compiled config, like PolicyCounters.
func (m *Metrics) UpstreamErrors(route string) prometheus.Counter {
	return m.upstreamErrors.WithLabelValues(route)
}

// SetStoreUp records whether the last store round trip succeeded.
func (m *Metrics) SetStoreUp(up bool) { m.storeUp.Set(b2f(up)) }

// StoreError counts one failed or timed-out store round trip.
func (m *Metrics) StoreError() { m.storeErrors.Inc() }

// ObserveDecision records the time of one whole limiter decision.
func (m *Metrics) ObserveDecision(d time.Duration) { m.decisionDuration.Observe(d.Seconds()) }

// ObserveStore records the time of one store round trip.
func (m *Metrics) ObserveStore(d time.Duration) { m.storeDuration.Observe(d.Seconds()) }

// ObserveDelay records one leaky-bucket shaping wait (the wait decided, in
// the request's Decision; call it when the request starts waiting).
func (m *Metrics) ObserveDelay(d time.Duration) { m.delay.Observe(d.Seconds()) }

// AddWaiting moves rlproxy_waiting_requests by delta requests: +1 when a
// request starts its delay, -1 when it ends (served, refused or cancelled).
func (m *Metrics) AddWaiting(delta int) { m.waiting.Add(float64(delta)) }

// SetBreakerOpen records the store circuit breaker's state.
func (m *Metrics) SetBreakerOpen(open bool) { m.breakerOpen.Set(b2f(open)) }

// LocalRefusal counts one request refused from the local over-limit cache.
// The request is also counted in rlproxy_requests_total as rejected.
func (m *Metrics) LocalRefusal() { m.localRefusals.Inc() }

// Shaping cap label values of rlproxy_shaping_refusals_total.
const (
	CapMaxWait    = "max_wait"    // the wait was longer than server.max_wait
	CapMaxWaiting = "max_waiting" // server.max_waiting requests were waiting already
)

// ShapingRefusal counts one request of route refused by a shaping cap
// (which: CapMaxWait or CapMaxWaiting) after its policies accepted it with a
// wait. Its policies have counted it already, as delayed (their decision);
// the refusal undid their charge (policy.Limiter.Refund), so this counter
// is what tells those requests apart from the delayed ones served.
func (m *Metrics) ShapingRefusal(route, which string) {
	m.shapingRefusals.WithLabelValues(route, which).Inc()
}

// ConfigLoaded records a successful config load at now without counting a
// reload: call it for the initial load so the timestamp is never 0.
func (m *Metrics) ConfigLoaded(now time.Time) { m.lastReload.Set(unixSeconds(now)) }

// ConfigReload counts one reload attempt; a successful one also sets the last
// success timestamp to now. Content identical to the running config is not a
// reload (docs/CONTRACT.md) and should not be counted.
func (m *Metrics) ConfigReload(success bool, now time.Time) {
	if !success {
		m.reloadFailure.Inc()
		return
	}
	m.reloadSuccess.Inc()
	m.ConfigLoaded(now)
}

// MemoryStats is what the in-process store exposes for its two metrics.
type MemoryStats interface {
	// Len is the number of keys held now.
	Len() int
	// Evictions is the number of keys evicted by the LRU bound since the
	// store was created.
	Evictions() uint64
}

// SetMemoryStore makes the memory store metrics read s at scrape time; nil
// (e.g. after a reload to the Valkey store) stops reporting them. Evictions
// stay monotonic across a swap: the old source's count is carried over.
func (m *Metrics) SetMemoryStore(s MemoryStats) { m.memory.set(s) }

// memoryCollector reports rlproxy_memory_store_keys and
// rlproxy_memory_store_evictions_total from a swappable MemoryStats.
type memoryCollector struct {
	keys, evictions *prometheus.Desc

	mu   sync.Mutex // guards src, base against a concurrent swap and scrape
	src  MemoryStats
	base uint64 // evictions of the sources swapped out
}

func (c *memoryCollector) set(s MemoryStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src == s {
		return
	}
	if c.src != nil {
		c.base += c.src.Evictions()
	}
	c.src = s
}

// Describe implements prometheus.Collector.
func (c *memoryCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.keys
	ch <- c.evictions
}

// Collect implements prometheus.Collector.
func (c *memoryCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	src, base := c.src, c.base
	c.mu.Unlock()
	if src == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.keys, prometheus.GaugeValue, float64(src.Len()))
	ch <- prometheus.MustNewConstMetric(c.evictions, prometheus.CounterValue, float64(base+src.Evictions()))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// unixSeconds is t as fractional Unix seconds (ms precision is plenty for a
// reload timestamp).
func unixSeconds(t time.Time) float64 { return float64(t.UnixMilli()) / 1e3 }
