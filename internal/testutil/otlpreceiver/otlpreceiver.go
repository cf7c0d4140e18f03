// Package otlpreceiver is an OpenTelemetry collector's trace receiver for
// tests: the OTLP/gRPC TraceService (grpc-go) and OTLP/HTTP protobuf
// (POST /v1/traces) on loopback, both built from the OTLP protocol
// definitions (go.opentelemetry.io/proto/otlp), keeping every span it
// receives.
package otlpreceiver

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened: ids in lowercase hex, its
// resource's service.name, its attributes as strings (a string slice
// joined with ",").
type Span struct {
	Service, Name                 string
	TraceID, SpanID, ParentSpanID string
	Kind                          tracepb.Span_SpanKind
	Start, End                    time.Time
	Attrs                         map[string]string
	// Links are the linked spans' ids, as "TRACEID/SPANID".
	Links []string
	// Error is whether the span's status is an error.
	Error bool
}

// Receiver keeps the spans exported to it. Safe for concurrent use.
type Receiver struct {
	coltrace.UnimplementedTraceServiceServer
	// GRPCURL and HTTPURL are the endpoints: http://127.0.0.1:PORT for
	// OTLP/gRPC, http://127.0.0.1:PORT/v1/traces for OTLP/HTTP.
	GRPCURL, HTTPURL string

	mu      sync.Mutex
	spans   []Span
	changed chan struct{} // closed and replaced on every export
}

// Start runs a Receiver until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{changed: make(chan struct{})}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(gs, r)
	go func() { _ = gs.Serve(gl) }()
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(r.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(hl) }()
	t.Cleanup(func() {
		gs.Stop()
		_ = hs.Close()
	})
	r.GRPCURL = "http://" + gl.Addr().String()
	r.HTTPURL = "http://" + hl.Addr().String() + "/v1/traces"
	return r
}

// Export implements the OTLP/gRPC TraceService.
func (r *Receiver) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	r.add(req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// serveHTTP is OTLP/HTTP with protobuf bodies (uncompressed).
func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want POST /v1/traces application/x-protobuf", http.StatusBadRequest)
		return
	}
	b, err := io.ReadAll(req.Body)
	var m coltrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &m)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&m)
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) add(req *coltrace.ExportTraceServiceRequest) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, flatten(service, s))
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

func flatten(service string, s *tracepb.Span) Span {
	sp := Span{
		Service: service, Name: s.GetName(), Kind: s.GetKind(),
		TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
		Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())),
		Attrs: attrs(s.GetAttributes()),
		Error: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
	}
	if p := s.GetParentSpanId(); len(p) > 0 {
		sp.ParentSpanID = hex.EncodeToString(p)
	}
	for _, l := range s.GetLinks() {
		sp.Links = append(sp.Links, hex.EncodeToString(l.GetTraceId())+"/"+hex.EncodeToString(l.GetSpanId()))
	}
	return sp
}

// attrs flattens OTLP attributes to strings.
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = str(kv.GetValue())
	}
	return m
}

func str(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		if x.BoolValue {
			return "true"
		}
		return "false"
	case *commonpb.AnyValue_ArrayValue:
		s := ""
		for i, e := range x.ArrayValue.GetValues() {
			if i > 0 {
				s += ","
			}
			s += str(e)
		}
		return s
	}
	return v.String()
}

// Spans returns a copy of every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Wait returns the spans received once ok holds for them, or fails the
// test when it does not hold within timeout.
func (r *Receiver) Wait(t testing.TB, timeout time.Duration, ok func([]Span) bool) []Span {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		spans, changed := append([]Span(nil), r.spans...), r.changed
		r.mu.Unlock()
		if ok(spans) {
			return spans
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("otlpreceiver: condition not met within %v; received %d spans: %+v", timeout, len(spans), spans)
			return nil
		}
	}
}

// Trace returns spans' spans of trace id.
func Trace(spans []Span, id string) []Span {
	var out []Span
	for _, s := range spans {
		if s.TraceID == id {
			out = append(out, s)
		}
	}
	return out
}

// Sink serves OTLP/gRPC on ln until it is closed, counting the spans it
// receives in n and keeping none: a collector for benchmarks, which must
// not grow with the spans sent.
func Sink(ln net.Listener, n *atomic.Int64) error {
	gs := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(gs, &sink{n: n})
	return gs.Serve(ln)
}

type sink struct {
	coltrace.UnimplementedTraceServiceServer
	n *atomic.Int64
}

// Export implements the OTLP/gRPC TraceService.
func (s *sink) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			s.n.Add(int64(len(ss.GetSpans())))
		}
	}
	return &coltrace.ExportTraceServiceResponse{}, nil
}
