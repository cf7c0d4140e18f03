package tracing

import (
	"io"
	"net/http"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// RoundTrip is one upstream attempt through next, traced: a client span
// under the request's server span, from the request sent to the response
// body closed (or the attempt failed), whose context the upstream
// receives as traceparent (and tracestate). upstream and server name the
// upstream and the server tried ("host:port"). req is the outgoing request
// the reverse proxy made for this exchange alone; each attempt sets its
// trace headers afresh.
func (t *Tracer) RoundTrip(next http.RoundTripper, req *http.Request, upstream, server string) (*http.Response, error) {
	ctx, s := t.tracer.Start(req.Context(), req.Method, trace.WithSpanKind(trace.SpanKindClient))
	if s.IsRecording() {
		s.SetAttributes(
			attribute.String("http.request.method", req.Method),
			attribute.String("server.address", req.URL.Hostname()),
			attribute.String("url.path", req.URL.Path),
			AttrUpstream.String(upstream), AttrServer.String(server))
		if p := req.URL.Port(); p != "" {
			if n, err := strconv.Atoi(p); err == nil {
				s.SetAttributes(attribute.Int("server.port", n))
			}
		}
	}
	delete(req.Header, "Tracestate")
	t.prop.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := next.RoundTrip(req)
	if !s.IsRecording() { // unsampled: nothing to record, nor to end later
		s.End()
		return resp, err
	}
	if err != nil {
		s.RecordError(err)
		s.SetStatus(codes.Error, err.Error())
		s.End()
		return nil, err
	}
	s.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 500 {
		s.SetStatus(codes.Error, strconv.Itoa(resp.StatusCode))
	}
	// A 101's body is the switched connection, which ReverseProxy needs
	// as an io.ReadWriteCloser: not wrapped, the span ends at the switch.
	if resp.Body == nil || resp.Body == http.NoBody || resp.StatusCode == http.StatusSwitchingProtocols {
		s.End()
		return resp, nil
	}
	resp.Body = &spanBody{ReadCloser: resp.Body, s: s}
	return resp, nil
}

// spanBody ends its attempt's span when the response body is closed.
type spanBody struct {
	io.ReadCloser
	s    trace.Span
	once sync.Once
}

// Close implements io.Closer.
func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.s.End() })
	return err
}
