package tracing

import (
	"context"
	"net/http"
	"net/netip"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys of rlproxy's own (OpenTelemetry semantic conventions
// name the HTTP ones; these say what the limiter did).
const (
	AttrRoute     = attribute.Key("rlproxy.route")
	AttrPolicies  = attribute.Key("rlproxy.policies")
	AttrDecision  = attribute.Key("rlproxy.decision")
	AttrPolicy    = attribute.Key("rlproxy.policy")
	AttrWaitMS    = attribute.Key("rlproxy.wait_ms")
	AttrUpstream  = attribute.Key("rlproxy.upstream")
	AttrServer    = attribute.Key("rlproxy.upstream.server")
	AttrRetries   = attribute.Key("rlproxy.upstream.retries")
	AttrBatchSize = attribute.Key("rlproxy.store.batch_size")
)

// Span is one request's server span; the zero Span is an untraced request
// and every method on it does nothing.
type Span struct{ s trace.Span }

// StartRequest starts r's server span and returns r carrying it (for the
// store round trip and the upstream attempts, which start theirs under
// it). A traceparent (and tracestate) is believed only when trusted (the
// TCP peer is one of real_ip.trusted_proxies): its trace is continued and
// its sampled flag followed. Otherwise rlproxy starts a trace of its own,
// sampled by sample_ratio, so that a client can neither force sampling
// nor pick the trace id. r's traceparent is then the server span's and
// its tracestate the trace's, what an upstream reached without a client
// span (the built-in echo) receives.
func (t *Tracer) StartRequest(r *http.Request, trusted bool) (*http.Request, Span) {
	ctx := r.Context()
	h := propagation.HeaderCarrier(r.Header)
	if trusted {
		ctx = t.prop.Extract(ctx, h)
	}
	ctx, s := t.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer))
	if s.IsRecording() {
		s.SetAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("url.path", r.URL.Path),
			attribute.String("server.address", r.Host),
			attribute.String("network.peer.address", peerHost(r.RemoteAddr)),
			attribute.String("network.protocol.version", protoVersion(r)),
			attribute.String("user_agent.original", r.Header.Get("User-Agent")))
	}
	delete(r.Header, "Tracestate")
	t.prop.Inject(ctx, h)
	return r.WithContext(ctx), Span{s}
}

// TraceID is the span's trace id in lowercase hex (32 digits), rlproxy's
// request id while tracing is on; "" for the zero Span.
func (s Span) TraceID() string {
	if s.s == nil {
		return ""
	}
	return s.s.SpanContext().TraceID().String()
}

// Recording reports whether the span is sampled: attributes set on it are
// exported. Callers skip building attributes otherwise.
func (s Span) Recording() bool { return s.s != nil && s.s.IsRecording() }

// Decided records the policies that decided the request (route and plan
// policies, in order).
func (s Span) Decided(policies []string) {
	if s.Recording() {
		s.s.SetAttributes(AttrPolicies.StringSlice(policies))
	}
}

// Outcome is what a request came to, for its span's end.
type Outcome struct {
	// Route is the route's name ("" when none matched); Decision the
	// access log's verdict (allowed, delayed, rejected, ...); Policy the
	// policy that refused it ("" unless refused by one); WaitMS its
	// leaky-bucket wait.
	Route, Decision, Policy string
	WaitMS                  int64
	// Client is the client's address as real_ip resolved it.
	Client netip.Addr
	// Status is the status answered to the client.
	Status int
	// Upstream is the upstream's name, Server the last server tried
	// ("" when none was), Retries the attempts after the first.
	Upstream, Server string
	Retries          int
}

// End ends the span with o's attributes (o may be nil when the span is
// not Recording), named "METHOD ROUTE" (OpenTelemetry
// HTTP semantic conventions: the low-cardinality name). A 5xx answer is
// the span's error status; a refusal (429) is not an error of rlproxy's,
// and is marked by rlproxy.decision and rlproxy.policy.
func (s Span) End(method string, o *Outcome) {
	if s.s == nil {
		return
	}
	if s.s.IsRecording() {
		if o.Route != "" {
			s.s.SetName(method + " " + o.Route)
			s.s.SetAttributes(AttrRoute.String(o.Route), attribute.String("http.route", o.Route))
		}
		s.s.SetAttributes(AttrDecision.String(o.Decision), attribute.Int("http.response.status_code", o.Status))
		if o.Client.IsValid() {
			s.s.SetAttributes(attribute.String("client.address", o.Client.String()))
		}
		if o.Policy != "" {
			s.s.SetAttributes(AttrPolicy.String(o.Policy))
		}
		if o.WaitMS > 0 {
			s.s.SetAttributes(AttrWaitMS.Int64(o.WaitMS))
		}
		if o.Server != "" {
			s.s.SetAttributes(AttrUpstream.String(o.Upstream), AttrServer.String(o.Server), AttrRetries.Int(o.Retries))
		}
		if o.Status >= 500 {
			s.s.SetStatus(codes.Error, strconv.Itoa(o.Status))
		}
	}
	s.s.End()
}

// TraceID returns the trace id of the span ctx carries (a traced
// request's context), or "" when it carries none.
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// peerHost is the address part of RemoteAddr ("IP:port").
func peerHost(remote string) string {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap().String()
	}
	return remote
}

// protoVersion is network.protocol.version: "1.1", "2", "1.0".
func protoVersion(r *http.Request) string {
	switch {
	case r.ProtoMajor == 2:
		return "2"
	case r.ProtoMinor == 0:
		return "1.0"
	}
	return "1.1"
}
