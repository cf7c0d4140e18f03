package tracing

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// counts keeps the span accounting behind the trace metrics: every
// sampled span that ends is made; it is then exported (the collector
// accepted it), dropped (the queue was full, the export failed or timed
// out, or it ended after Shutdown), or still pending (queued or being
// exported). made = exported + dropped + pending, so once the queue is
// empty (after a flush, or at rest) dropped = made − exported.
type counts struct {
	made, exported, dropped atomic.Uint64
	pending                 atomic.Int64
	closed                  atomic.Bool

	log      *slog.Logger
	every    time.Duration // least time between two logged export failures
	mu       sync.Mutex
	lastLog  time.Time
	failures int // export failures since the last logged one
}

// newCounts returns the accounting, its three counters registered in reg
// (when not nil).
func newCounts(reg prometheus.Registerer, log *slog.Logger, every time.Duration) *counts {
	c := &counts{log: log, every: every}
	if reg == nil {
		return c
	}
	for _, m := range []struct {
		name, help string
		v          *atomic.Uint64
	}{
		{"rlproxy_trace_spans_total", "Sampled spans ended (made), each then exported or dropped.", &c.made},
		{"rlproxy_trace_spans_exported_total", "Spans the OTLP collector accepted.", &c.exported},
		{"rlproxy_trace_spans_dropped_total", "Spans never exported: the export queue was full (tracing.queue_size), the export failed or timed out, or they ended after shutdown.", &c.dropped},
	} {
		v := m.v
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: m.name, Help: m.help},
			func() float64 { return float64(v.Load()) }))
	}
	return c
}

// processor returns next behind the accounting, with at most limit spans
// pending: a span ended while limit are pending is dropped at once, so the
// request that ends it never waits (next's own queue, larger, never fills).
func (c *counts) processor(next sdktrace.SpanProcessor, limit int) sdktrace.SpanProcessor {
	return &countingProcessor{SpanProcessor: next, c: c, limit: int64(limit)}
}

// countingProcessor counts and bounds what reaches the batch processor.
type countingProcessor struct {
	sdktrace.SpanProcessor
	c     *counts
	limit int64
}

// OnEnd counts s and hands it to the batch processor, or drops it.
func (p *countingProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	c := p.c
	c.made.Add(1)
	if c.closed.Load() {
		c.dropped.Add(1)
		return
	}
	if c.pending.Add(1) > p.limit {
		c.pending.Add(-1)
		c.dropped.Add(1)
		return
	}
	p.SpanProcessor.OnEnd(s)
}

// close makes the spans that end from now on dropped ones, and those the
// batch processor still held at its shutdown too.
func (c *counts) close() {
	c.closed.Store(true)
	if n := c.pending.Swap(0); n > 0 {
		c.dropped.Add(uint64(n))
	}
}

// exporter returns next counted: each export settles its spans as
// exported or dropped. A failure is logged (rate-limited) and not
// returned, so the SDK does not also print it on its global logger.
func (c *counts) exporter(next sdktrace.SpanExporter) sdktrace.SpanExporter {
	return &countingExporter{SpanExporter: next, c: c}
}

type countingExporter struct {
	sdktrace.SpanExporter
	c *counts
}

// ExportSpans implements sdktrace.SpanExporter.
func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	c, n := e.c, len(spans)
	if c.closed.Load() {
		// Shutdown already counted what was pending as dropped.
		if err == nil {
			c.exported.Add(uint64(n))
			c.dropped.Add(^uint64(n - 1)) // −n
		}
		return nil
	}
	c.pending.Add(-int64(n))
	if err == nil {
		c.exported.Add(uint64(n))
		return nil
	}
	c.dropped.Add(uint64(n))
	c.logFailure(err, n)
	return nil
}

// logFailure logs a failed export, at most once per c.every; the lines
// between are counted in the next one.
func (c *counts) logFailure(err error, n int) {
	if c.log == nil {
		return
	}
	c.mu.Lock()
	c.failures++
	now := time.Now()
	if now.Sub(c.lastLog) < c.every {
		c.mu.Unlock()
		return
	}
	failures := c.failures
	c.lastLog, c.failures = now, 0
	c.mu.Unlock()
	c.log.Warn("trace export failed: spans dropped (rlproxy_trace_spans_dropped_total)",
		"spans", n, "failed_exports", failures, "err", err.Error())
}
