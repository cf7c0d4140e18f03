package tracing

import (
	"context"
	"errors"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestStoreRoundTripLinks: a round trip deciding three sampled requests
// and an unsampled one is one span, a child of the first sampled
// request's span, linked to the other two sampled ones, which link back
// to it; its error is its status. A round trip of unsampled requests
// makes no span.
func TestStoreRoundTripLinks(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	tr := &Tracer{tp: tp, tracer: tp.Tracer("test")}
	var ctxs []context.Context
	var reqs []trace.Span
	for range 3 {
		c, s := tr.tracer.Start(context.Background(), "request")
		ctxs, reqs = append(ctxs, c), append(reqs, s)
	}
	unsampled := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}}))
	end := tr.StoreHook()([]context.Context{unsampled, ctxs[0], ctxs[1], ctxs[2]})
	end(errors.New("timeout"))
	for _, s := range reqs {
		s.End()
	}
	var store sdktrace.ReadOnlySpan
	ended := rec.Ended()
	for _, s := range ended {
		if s.Name() == "valkey round trip" {
			store = s
		}
	}
	if store == nil || len(ended) != 4 {
		t.Fatalf("ended %d spans, want 3 requests and 1 store span", len(ended))
	}
	if store.Parent().SpanID() != reqs[0].SpanContext().SpanID() {
		t.Errorf("store span's parent %v, want the first sampled request %v", store.Parent().SpanID(), reqs[0].SpanContext().SpanID())
	}
	if l := store.Links(); len(l) != 2 || l[0].SpanContext.SpanID() != reqs[1].SpanContext().SpanID() || l[1].SpanContext.SpanID() != reqs[2].SpanContext().SpanID() {
		t.Errorf("store span links %+v, want requests 2 and 3", l)
	}
	if store.Status().Code != 1 /* Error */ {
		t.Errorf("store span status %+v, want an error", store.Status())
	}
	for _, s := range ended {
		if s.Name() != "request" {
			continue
		}
		back := len(s.Links()) == 1 && s.Links()[0].SpanContext.SpanID() == store.SpanContext().SpanID()
		first := s.SpanContext().SpanID() == reqs[0].SpanContext().SpanID()
		if back == first {
			t.Errorf("request %v links %+v: want a link back to the store span on every request but its parent", s.SpanContext().SpanID(), s.Links())
		}
	}
	if end := tr.StoreHook()([]context.Context{unsampled}); len(rec.Ended()) != 4 {
		t.Fatal("a round trip of unsampled requests made a span")
	} else {
		end(nil)
	}
	var off *Tracer
	if off.StoreHook() != nil {
		t.Fatal("StoreHook of a nil Tracer is not nil")
	}
}
