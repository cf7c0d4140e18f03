package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// StoreHook returns the function the Valkey store calls as a round trip
// that carries decisions starts (valkey.Options.TraceRoundTrip), or nil
// when t is nil, so the store then skips it.
func (t *Tracer) StoreHook() func(ctxs []context.Context) (end func(error)) {
	if t == nil {
		return nil
	}
	return t.storeRoundTrip
}

// storeRoundTrip starts the span of one store round trip deciding the
// requests whose contexts are ctxs (one for a decision sent alone, one
// per decision of a batch). Decisions of concurrent requests are batched
// and merged, so the span belongs to no single request: it is a child of
// the first sampled one (which shows it inline), and links to the server
// span of every other sampled one; each of those links back to it as it
// ends (OpenTelemetry's model of batch processing). With no sampled
// request in it no span is made.
func (t *Tracer) storeRoundTrip(ctxs []context.Context) (end func(error)) {
	var parent context.Context
	var links []trace.Link
	var linked []trace.Span
	for _, c := range ctxs {
		if c == nil {
			continue
		}
		sp := trace.SpanFromContext(c)
		if !sp.SpanContext().IsSampled() || !sp.IsRecording() {
			continue
		}
		if parent == nil {
			parent = c
			continue
		}
		links = append(links, trace.Link{SpanContext: sp.SpanContext()})
		linked = append(linked, sp)
	}
	if parent == nil {
		return noEnd
	}
	_, s := t.tracer.Start(parent, "valkey round trip", trace.WithSpanKind(trace.SpanKindClient), trace.WithLinks(links...),
		trace.WithAttributes(attribute.String("db.system.name", "valkey"), attribute.String("db.operation.name", "EVALSHA"),
			AttrBatchSize.Int(len(ctxs))))
	return func(err error) {
		if err != nil {
			s.RecordError(err)
			s.SetStatus(codes.Error, err.Error())
		}
		back := trace.Link{SpanContext: s.SpanContext()}
		for _, sp := range linked {
			sp.AddLink(back)
		}
		s.End()
	}
}

// noEnd ends a round trip that has no span.
func noEnd(error) {}
