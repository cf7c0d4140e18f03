// Package tracing is rlproxy's OpenTelemetry tracing: a server span per
// proxied request, a client span per upstream attempt, a span per store
// round trip (linked from the requests it decided), W3C Trace Context
// propagated to the upstream, and export over OTLP (gRPC or HTTP) in a
// batch processor that never blocks a request.
//
// A nil *Tracer is tracing off: every method is then a no-op, and the
// request path calls none of them (it checks for nil first), so that off
// costs nothing.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"rlproxy/internal/config"
)

// scope is the instrumentation scope name of rlproxy's spans.
const scope = "rlproxy"

// Tracer makes rlproxy's spans and exports them. Safe for concurrent use;
// nil is off.
type Tracer struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	prop   propagation.TraceContext
	counts *counts
}

// Options are New's dependencies.
type Options struct {
	// Registerer receives rlproxy_trace_spans_total,
	// rlproxy_trace_spans_exported_total and
	// rlproxy_trace_spans_dropped_total; nil registers nothing.
	Registerer prometheus.Registerer
	// Log receives export failures (at most one line per export timeout);
	// nil discards them.
	Log *slog.Logger
	// Version is the service.version resource attribute.
	Version string
}

// New returns the Tracer cfg describes, or nil when cfg is nil (tracing
// off). The exporter connects lazily: a collector that is down at start
// only makes exports fail (counted as dropped spans). Errors: an exporter
// that cannot be built from cfg.
func New(cfg *config.Tracing, o Options) (*Tracer, error) {
	if cfg == nil {
		return nil, nil
	}
	exp, err := newExporter(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the OTLP exporter: %w", err)
	}
	c := newCounts(o.Registerer, o.Log, cfg.ExportTimeout)
	// The SDK's processor drops spans when its queue is full; the counting
	// one in front of it drops them before that (its bound is smaller), so
	// that every dropped span is counted here.
	bsp := sdktrace.NewBatchSpanProcessor(c.exporter(exp),
		sdktrace.WithMaxQueueSize(cfg.QueueSize+maxBatch),
		sdktrace.WithMaxExportBatchSize(maxBatch),
		sdktrace.WithBatchTimeout(cfg.BatchTimeout),
		sdktrace.WithExportTimeout(cfg.ExportTimeout))
	res := resource.NewSchemaless(
		attribute.String("service.name", cfg.ServiceName),
		attribute.String("service.version", o.Version),
		attribute.String("telemetry.sdk.language", "go"),
		attribute.String("telemetry.sdk.name", "opentelemetry"))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		// The parent's decision counts only when the request carried one
		// rlproxy believed: StartRequest extracts a traceparent from a
		// trusted proxy alone, so a client cannot force sampling.
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
		sdktrace.WithSpanProcessor(c.processor(bsp, cfg.QueueSize)))
	return &Tracer{tp: tp, tracer: tp.Tracer(scope), counts: c}, nil
}

// maxBatch is the most spans one export carries (the SDK's default).
const maxBatch = 512

// newExporter builds cfg's OTLP exporter: gRPC or HTTP protobuf, plaintext
// for an http:// endpoint. Retries of a failed export stop at
// export_timeout, when the batch processor gives the export up.
func newExporter(cfg *config.Tracing) (sdktrace.SpanExporter, error) {
	u, err := url.Parse(cfg.OTLPEndpoint)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if cfg.Protocol == config.TracingHTTP {
		return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()),
			otlptracehttp.WithTimeout(cfg.ExportTimeout),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 100 * time.Millisecond,
				MaxInterval: time.Second, MaxElapsedTime: cfg.ExportTimeout}))
	}
	var client otlptrace.Client = otlptracegrpc.NewClient(otlptracegrpc.WithEndpointURL(u.String()),
		otlptracegrpc.WithTimeout(cfg.ExportTimeout),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 100 * time.Millisecond,
			MaxInterval: time.Second, MaxElapsedTime: cfg.ExportTimeout}))
	return otlptrace.New(ctx, client)
}

// Shutdown exports the spans still queued (bounded by ctx) and stops the
// exporter; spans ended afterwards are dropped. Nil-safe.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	err := t.tp.Shutdown(ctx)
	t.counts.close()
	return err
}

// ForceFlush exports the spans queued so far, bounded by ctx. Nil-safe.
func (t *Tracer) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.ForceFlush(ctx)
}
