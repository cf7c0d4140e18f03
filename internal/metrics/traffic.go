package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// traffic holds the collectors of every request and every upstream
// exchange, limited or not. Label values come from the configuration
// (route, upstream and server names) or are HTTP status codes: never from
// the request, so the series stay bounded.
type traffic struct {
	requests         *prometheus.CounterVec
	duration         *prometheus.HistogramVec
	upstreamDuration *prometheus.HistogramVec
	retries          *prometheus.CounterVec
	accessDropped    prometheus.Counter
	servers          *serverCollector

	mu     sync.Mutex // guards routes
	routes map[string]*RouteTraffic
}

// latencyBuckets span a fast cached answer (1 ms) to a slow upstream (30 s,
// the default response_header_timeout).
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

func newTraffic(reg prometheus.Registerer) *traffic {
	t := &traffic{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rlproxy_http_requests_total",
			Help: "Requests answered, by route (\"-\" for no match) and the status code sent to the client, rlproxy's own answers included.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rlproxy_http_request_duration_seconds",
			Help:    "Time from the request's arrival to the end of its response, as the client sees it.",
			Buckets: latencyBuckets,
		}, []string{"route"}),
		upstreamDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rlproxy_upstream_request_duration_seconds",
			Help:    "Time from sending a request to an upstream server to its response headers, per attempt.",
			Buckets: latencyBuckets,
		}, []string{"upstream"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rlproxy_upstream_retries_total",
			Help: "Requests sent again to another server of the pool after one could not be sent.",
		}, []string{"upstream"}),
		accessDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rlproxy_access_log_dropped_total",
			Help: "Access log lines dropped because the log's buffer was full (the request path never waits for the log).",
		}),
		servers: &serverCollector{desc: prometheus.NewDesc("rlproxy_upstream_server_up",
			"1 if the upstream server is in rotation (neither the health check nor max_fails holds it out), else 0.",
			[]string{"upstream", "server"}, nil)},
		routes: map[string]*RouteTraffic{},
	}
	reg.MustRegister(t.requests, t.duration, t.upstreamDuration, t.retries, t.accessDropped, t.servers)
	return t
}

// RouteTraffic is one route's rlproxy_http_requests_total and
// rlproxy_http_request_duration_seconds series. Observe does not allocate
// once a code has been seen.
type RouteTraffic struct {
	route    string
	vec      *prometheus.CounterVec
	duration prometheus.Observer
	codes    [900]atomic.Pointer[counterBox] // status 100..999
}

type counterBox struct{ c prometheus.Counter }

// Route returns route's traffic series ("-", config.ReservedRouteName, for
// requests that matched no route). Calling it
// again with the same name returns the same value, so reloads keep counts.
func (m *Metrics) Route(route string) *RouteTraffic {
	t := m.traffic
	t.mu.Lock()
	defer t.mu.Unlock()
	if rt := t.routes[route]; rt != nil {
		return rt
	}
	rt := &RouteTraffic{route: route, vec: t.requests, duration: t.duration.WithLabelValues(route)}
	t.routes[route] = rt
	return rt
}

// Observe counts one answer with status code that took d. An upgraded
// session (101: WebSocket) is counted but kept out of the duration
// histogram: a session of hours is no request latency.
func (rt *RouteTraffic) Observe(code int, d time.Duration) {
	if code != http.StatusSwitchingProtocols {
		rt.duration.Observe(d.Seconds())
	}
	if code < 100 || code > 999 {
		code = 999 // net/http refuses to write these: never reached
	}
	slot := &rt.codes[code-100]
	b := slot.Load()
	if b == nil {
		b = &counterBox{rt.vec.WithLabelValues(rt.route, strconv.Itoa(code))}
		if !slot.CompareAndSwap(nil, b) {
			b = slot.Load()
		}
	}
	b.c.Inc()
}

// UpstreamTraffic is one upstream's attempt latency and retry series.
type UpstreamTraffic struct {
	Duration prometheus.Observer // rlproxy_upstream_request_duration_seconds
	Retries  prometheus.Counter  // rlproxy_upstream_retries_total
}

// Upstream returns upstream's series, created at 0.
func (m *Metrics) Upstream(upstream string) UpstreamTraffic {
	return UpstreamTraffic{
		Duration: m.traffic.upstreamDuration.WithLabelValues(upstream),
		Retries:  m.traffic.retries.WithLabelValues(upstream),
	}
}

// AccessLogDropped counts one access log line dropped (buffer full).
func (m *Metrics) AccessLogDropped() { m.traffic.accessDropped.Inc() }

// ServerStates reports each upstream server's rotation state at scrape
// time through yield.
type ServerStates func(yield func(upstream, server string, up bool))

// SetUpstreamServers makes rlproxy_upstream_server_up read f at scrape
// time (nil reports nothing), so servers removed by a reload disappear.
func (m *Metrics) SetUpstreamServers(f ServerStates) {
	c := m.traffic.servers
	c.mu.Lock()
	c.f = f
	c.mu.Unlock()
}

// serverCollector reports rlproxy_upstream_server_up from ServerStates.
type serverCollector struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	f    ServerStates
}

// Describe implements prometheus.Collector.
func (c *serverCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *serverCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	f := c.f
	c.mu.Unlock()
	if f == nil {
		return
	}
	f(func(upstream, server string, up bool) {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, b2f(up), upstream, server)
	})
}
