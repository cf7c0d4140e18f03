package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// AllotmentStats is the allotment layer's figures per policy
// (allotment.Layer), read at scrape time.
type AllotmentStats interface {
	// EachAllotment calls f with every policy that took a slice: the
	// units held in slices and not yet spent or given back, and the
	// slices asked for since the layer was created.
	EachAllotment(f func(policy string, outstanding int64, fetches uint64))
}

// SetAllotments makes rlproxy_allotment_outstanding_units and
// rlproxy_allotment_fetches_total read s at scrape time; nil stops the
// outstanding units (no layer, no slices). Fetches stay monotonic across
// a swap (a reload that builds a new store): the old source's counts are
// carried over.
func (m *Metrics) SetAllotments(s AllotmentStats) { m.allot.set(s) }

// allotmentCollector reports the allotment metrics from a swappable
// AllotmentStats.
type allotmentCollector struct {
	outstanding, fetches *prometheus.Desc

	mu   sync.Mutex // guards src, base against a concurrent swap and scrape
	src  AllotmentStats
	base map[string]uint64 // fetches of the sources swapped out, per policy
}

func newAllotmentCollector() *allotmentCollector {
	return &allotmentCollector{
		outstanding: prometheus.NewDesc("rlproxy_allotment_outstanding_units",
			"Units of the policy's shared allowance this instance holds in allotments, charged in the store and not yet spent or given back: the bound of under-admission elsewhere.",
			[]string{"policy"}, nil),
		fetches: prometheus.NewDesc("rlproxy_allotment_fetches_total",
			"Allotments (slices of a key's allowance) this instance asked the store for.",
			[]string{"policy"}, nil),
		base: map[string]uint64{},
	}
}

func (c *allotmentCollector) set(s AllotmentStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src == s {
		return
	}
	if c.src != nil {
		c.src.EachAllotment(func(p string, _ int64, f uint64) { c.base[p] += f })
	}
	c.src = s
}

// Describe implements prometheus.Collector.
func (c *allotmentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.outstanding
	ch <- c.fetches
}

// Collect implements prometheus.Collector.
func (c *allotmentCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	if c.src != nil {
		c.src.EachAllotment(func(p string, out int64, f uint64) {
			seen[p] = true
			ch <- prometheus.MustNewConstMetric(c.outstanding, prometheus.GaugeValue, float64(out), p)
			ch <- prometheus.MustNewConstMetric(c.fetches, prometheus.CounterValue, float64(c.base[p]+f), p)
		})
	}
	for p, f := range c.base {
		if !seen[p] {
			ch <- prometheus.MustNewConstMetric(c.fetches, prometheus.CounterValue, float64(f), p)
		}
	}
}
