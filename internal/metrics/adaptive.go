package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"rlproxy/internal/adaptive"
)

// AdaptiveStates reports every adaptive gate's figures at scrape time.
type AdaptiveStates func() []adaptive.State

// adaptiveCollector reports the adaptive concurrency series from
// AdaptiveStates, read at scrape time so the request path updates no
// metric: rlproxy_adaptive_limit{upstream}, rlproxy_adaptive_in_flight and
// rlproxy_adaptive_queued{upstream,class}, rlproxy_shed_total{upstream,class}
// (no per-client series).
type adaptiveCollector struct {
	limit, inflight, queued, shed *prometheus.Desc

	mu sync.Mutex
	f  AdaptiveStates
}

func newAdaptiveCollector(reg *prometheus.Registry) *adaptiveCollector {
	c := &adaptiveCollector{
		limit: prometheus.NewDesc("rlproxy_adaptive_limit",
			"Requests that may be in flight to the upstream now (adaptive_concurrency), on this instance.", []string{"upstream"}, nil),
		inflight: prometheus.NewDesc("rlproxy_adaptive_in_flight",
			"Requests of a priority class holding a slot of the upstream's adaptive limit.", []string{"upstream", "class"}, nil),
		queued: prometheus.NewDesc("rlproxy_adaptive_queued",
			"Requests of a priority class waiting for a slot of the upstream's adaptive limit.", []string{"upstream", "class"}, nil),
		shed: prometheus.NewDesc("rlproxy_shed_total",
			"Requests of a priority class shed for the upstream's adaptive limit (503 overloaded), since the configuration was loaded.", []string{"upstream", "class"}, nil),
	}
	reg.MustRegister(c)
	return c
}

// SetAdaptive makes the adaptive series read f at scrape time (nil
// reports nothing).
func (m *Metrics) SetAdaptive(f AdaptiveStates) {
	m.adaptive.mu.Lock()
	m.adaptive.f = f
	m.adaptive.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (c *adaptiveCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.limit
	ch <- c.inflight
	ch <- c.queued
	ch <- c.shed
}

// Collect implements prometheus.Collector.
func (c *adaptiveCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	f := c.f
	c.mu.Unlock()
	if f == nil {
		return
	}
	for _, s := range f() {
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(s.Limit), s.Upstream)
		for _, cl := range s.Classes {
			ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(cl.InFlight), s.Upstream, cl.Name)
			ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(cl.Queued), s.Upstream, cl.Name)
			ch <- prometheus.MustNewConstMetric(c.shed, prometheus.CounterValue, float64(cl.Shed), s.Upstream, cl.Name)
		}
	}
}
