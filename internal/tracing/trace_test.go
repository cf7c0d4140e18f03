package tracing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"rlproxy/internal/testutil/otlpreceiver"
	"rlproxy/internal/testutil/redisserver"
	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// sdkTracer is a test program's own OpenTelemetry SDK, exporting each
// span to the receiver as it ends (a syncer), as a traced client or
// upstream would.
func sdkTracer(t *testing.T, rcv *otlpreceiver.Receiver, service string) trace.Tracer {
	t.Helper()
	exp, err := otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpointURL(rcv.GRPCURL))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer(service)
}

// tracedUpstream is an upstream that traces what it serves (a server span
// under the traceparent it receives) and keeps the traceparents it got.
type tracedUpstream struct {
	*httptest.Server
	mu     sync.Mutex
	parent []string
}

func startUpstream(t *testing.T, tr trace.Tracer) *tracedUpstream {
	u := &tracedUpstream{}
	prop := propagation.TraceContext{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.parent = append(u.parent, r.Header.Get("Traceparent"))
		u.mu.Unlock()
		if tr != nil {
			ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
			_, s := tr.Start(ctx, "upstream "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer))
			defer s.End()
		}
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(u.Close)
	return u
}

// lastParent is the last traceparent the upstream received.
func (u *tracedUpstream) lastParent(t *testing.T) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.parent) == 0 {
		t.Fatal("the upstream received no request")
	}
	return u.parent[len(u.parent)-1]
}

// config is an rlproxy config tracing to endpoint at ratio, the client
// (127.0.0.1) trusted as a proxy or not, one route limited to one
// request a minute.
func config(upstream, endpoint string, ratio string, trusted bool, extra string) string {
	proxies := "[10.9.9.9]"
	if trusted {
		proxies = "[127.0.0.1]"
	}
	return fmt.Sprintf(`
tracing:
  otlp_endpoint: %q
  sample_ratio: %s
  batch_timeout: 20ms
%s
real_ip:
  trusted_proxies: %s
upstreams:
  app: {url: %q}
policies:
  per-ip: {algorithm: token_bucket, rate: 1r/m, burst: 1, key: ip}
routes:
  - {name: api, match: {path_prefix: /}, upstream: app, policies: [per-ip]}
`, endpoint, ratio, extra, proxies, upstream)
}

// send makes a GET through rlproxy with traceparent tp ("" for none).
func send(t *testing.T, url, tp string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if tp != "" {
		req.Header.Set("Traceparent", tp)
	}
	resp, body := do(t, req)
	return resp, body
}

func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, b.String()
}

// TestOneTrace: a traced client's request through rlproxy to a traced
// upstream is one trace — client span, rlproxy's server span, rlproxy's
// client span of the attempt, the upstream's server span, each the
// parent of the next — with the decision on rlproxy's span; the refused
// second request's span names its policy, and its problem+json
// requestId is its trace id, as the access log's request_id is.
func TestOneTrace(t *testing.T) {
	rcv := otlpreceiver.Start(t)
	up := startUpstream(t, sdkTracer(t, rcv, "upstream"))
	var log syncBuffer
	in := rlproxytest.Start(t, config(up.URL, rcv.GRPCURL, "1", true, "log: {access: {enabled: true}}"), rlproxytest.WithLog(&log))
	client := sdkTracer(t, rcv, "client")

	ctx, cs := client.Start(context.Background(), "client GET", trace.WithSpanKind(trace.SpanKindClient))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, in.URL+"/v1/items", nil)
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	req.Header.Set("X-Request-Id", "client-chosen-id") // forwarded, but not rlproxy's request id
	resp, _ := do(t, req)
	cs.End()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	id := cs.SpanContext().TraceID().String()
	spans := otlpreceiver.Trace(rcv.Wait(t, 20*time.Second, func(s []otlpreceiver.Span) bool {
		return len(otlpreceiver.Trace(s, id)) == 4
	}), id)
	chain := map[string]otlpreceiver.Span{} // by parent span id
	for _, s := range spans {
		chain[s.ParentSpanID] = s
	}
	want := []struct{ service, name string }{{"client", "client GET"}, {"rlproxy", "GET api"}, {"rlproxy", "GET"}, {"upstream", "upstream /v1/items"}}
	parent := ""
	var got []otlpreceiver.Span
	for i, w := range want {
		s, ok := chain[parent]
		if !ok || s.Service != w.service || s.Name != w.name {
			t.Fatalf("span %d under %q: got %+v, want %s %q; trace: %+v", i, parent, s, w.service, w.name, spans)
		}
		got = append(got, s)
		parent = s.SpanID
	}
	srv, att := got[1], got[2]
	for k, v := range map[string]string{
		"rlproxy.route": "api", "rlproxy.decision": "allowed", "rlproxy.policies": "per-ip",
		"http.response.status_code": "200", "http.request.method": "GET", "url.path": "/v1/items",
		"rlproxy.upstream": "app", "rlproxy.upstream.server": strings.TrimPrefix(up.URL, "http://"),
		"client.address": "127.0.0.1",
	} {
		if srv.Attrs[k] != v {
			t.Errorf("server span %s = %q, want %q (attrs %v)", k, srv.Attrs[k], v, srv.Attrs)
		}
	}
	if att.Kind != 3 /* CLIENT */ || att.Attrs["http.response.status_code"] != "200" || att.Attrs["rlproxy.upstream"] != "app" {
		t.Errorf("attempt span: %+v", att)
	}
	if _, ok := srv.Attrs["rlproxy.policy"]; ok {
		t.Errorf("allowed request's span names a refusing policy: %v", srv.Attrs)
	}
	if !(got[0].Start.Before(got[1].Start) || got[0].Start.Equal(got[1].Start)) || got[2].Start.Before(got[1].Start) || got[3].Start.Before(got[2].Start) {
		t.Errorf("spans out of order: %+v", got)
	}
	if p := up.lastParent(t); !strings.HasPrefix(p, "00-"+id+"-"+att.SpanID+"-01") {
		t.Errorf("upstream traceparent %q, want the attempt span's (%s)", p, att.SpanID)
	}
	// The access log's request id is the trace id (its line is written
	// after the answer: waited for).
	if !waitfor.Poll(waitfor.Timeout, func() bool { return strings.Contains(log.String(), `"request_id":"`+id+`"`) }) {
		t.Fatalf("no access log line with request_id %s in:\n%s", id, log.String())
	}

	// The same client again: refused by per-ip, its span marked with it.
	resp, body := send(t, in.URL+"/v1/items", "")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second request: status %d, want 429", resp.StatusCode)
	}
	var problem struct{ RequestID string }
	if err := json.Unmarshal([]byte(body), &problem); err != nil || len(problem.RequestID) != 32 {
		t.Fatalf("problem %q: requestId not a trace id (%v)", body, err)
	}
	refused := otlpreceiver.Trace(rcv.Wait(t, 20*time.Second, func(s []otlpreceiver.Span) bool {
		return len(otlpreceiver.Trace(s, problem.RequestID)) == 1
	}), problem.RequestID)[0]
	for k, v := range map[string]string{"rlproxy.decision": "rejected", "rlproxy.policy": "per-ip", "http.response.status_code": "429", "rlproxy.route": "api"} {
		if refused.Attrs[k] != v {
			t.Errorf("refused span %s = %q, want %q (attrs %v)", k, refused.Attrs[k], v, refused.Attrs)
		}
	}
	if refused.Error {
		t.Errorf("a refusal is not rlproxy's error: %+v", refused)
	}
}

// clientParent is a sampled traceparent a client might send.
const clientParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// TestUntrustedParentCannotForceSampling: at ratio 0 a sampled
// traceparent from a peer outside real_ip.trusted_proxies is not
// followed — rlproxy starts its own unsampled trace (another trace id,
// flags 00 upstream) and exports nothing — while the same header from a
// trusted proxy is: its trace continues, sampled, and is exported.
func TestUntrustedParentCannotForceSampling(t *testing.T) {
	rcv := otlpreceiver.Start(t)
	up := startUpstream(t, nil)
	in := rlproxytest.Start(t, config(up.URL, rcv.GRPCURL, "0", false, ""))
	for _, tp := range []string{clientParent, ""} {
		if resp, _ := send(t, in.URL+"/a", tp); resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	p := up.lastParent(t)
	if len(p) != 55 || !strings.HasSuffix(p, "-00") || strings.Contains(p, "0af7651916cd43dd8448eb211c80319c") {
		t.Fatalf("upstream traceparent %q: want rlproxy's own unsampled trace", p)
	}
	up.mu.Lock()
	first := up.parent[0]
	up.mu.Unlock()
	if strings.Contains(first, "0af7651916cd43dd8448eb211c80319c") || !strings.HasSuffix(first, "-00") {
		t.Fatalf("untrusted client's traceparent followed: upstream got %q", first)
	}
	// Unsampled spans never reach the exporter: none made at all.
	if n := spanCount(t, in, "rlproxy_trace_spans_total"); n != 0 {
		t.Fatalf("rlproxy_trace_spans_total = %v at ratio 0, want 0", n)
	}

	// From a trusted proxy the same header decides: sampled and exported.
	in2 := rlproxytest.Start(t, config(up.URL, rcv.GRPCURL, "0", true, ""))
	if resp, _ := send(t, in2.URL+"/b", clientParent); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if p := up.lastParent(t); !strings.HasPrefix(p, "00-0af7651916cd43dd8448eb211c80319c-") || !strings.HasSuffix(p, "-01") {
		t.Fatalf("trusted proxy's traceparent not continued: upstream got %q", p)
	}
	spans := rcv.Wait(t, 20*time.Second, func(s []otlpreceiver.Span) bool {
		return len(otlpreceiver.Trace(s, "0af7651916cd43dd8448eb211c80319c")) == 2
	})
	if len(spans) != 2 {
		t.Fatalf("received %d spans, want only the trusted request's 2: %+v", len(spans), spans)
	}
	for _, s := range spans {
		if s.Name == "GET api" && s.ParentSpanID != "b7ad6b7169203331" {
			t.Errorf("server span's parent %q, want the proxy's b7ad6b7169203331", s.ParentSpanID)
		}
	}
}

// spanCount scrapes one of the trace counters.
func spanCount(t *testing.T, in *rlproxytest.Instance, name string) float64 {
	t.Helper()
	mf := in.Metrics(t)[name]
	if mf == nil || len(mf.GetMetric()) != 1 {
		t.Fatalf("%s: not exposed", name)
	}
	return mf.GetMetric()[0].GetCounter().GetValue()
}

// TestCollectorDown: with the collector a black hole (it accepts and
// never answers, so every export hangs until export_timeout) requests
// are served without waiting for it; the spans beyond the queue are
// dropped at once, the queued ones when their export times out, and
// every span made is counted: dropped = made − exported, exported 0.
func TestCollectorDown(t *testing.T) {
	hole := blackHole(t)
	up := startUpstream(t, nil)
	cfg := strings.Replace(config(up.URL, "http://"+hole, "1", false, "  queue_size: 4\n  export_timeout: 2s"), "burst: 1,", "burst: 1000,", 1)
	in := rlproxytest.Start(t, cfg)
	const n = 20
	start := time.Now()
	for i := range n {
		if resp, _ := send(t, in.URL+"/x", ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
	if d := time.Since(start); d >= 2*time.Second {
		t.Fatalf("%d requests took %v: the request path waited for the collector (export_timeout 2s)", n, d)
	}
	// Each request made two spans (server, upstream attempt). Wait until
	// every one is settled: exported or dropped.
	var made, exported, dropped float64
	if !waitfor.Poll(waitfor.Timeout, func() bool {
		made, exported, dropped = spanCount(t, in, "rlproxy_trace_spans_total"),
			spanCount(t, in, "rlproxy_trace_spans_exported_total"), spanCount(t, in, "rlproxy_trace_spans_dropped_total")
		return made == 2*n && exported+dropped == made
	}) {
		t.Fatalf("spans not settled: made %v, exported %v, dropped %v", made, exported, dropped)
	}
	t.Logf("made %v, exported %v, dropped %v", made, exported, dropped)
	if exported != 0 || dropped != made-exported {
		t.Fatalf("made %v, exported %v, dropped %v: want dropped = made − exported = %v", made, exported, dropped, made)
	}
}

// blackHole is a TCP address that accepts connections and never answers.
func blackHole(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// TestHTTPAndStoreSpan: over OTLP/HTTP, a request decided on Valkey has
// a span for its store round trip, a child of its server span.
func TestHTTPAndStoreSpan(t *testing.T) {
	rcv := otlpreceiver.Start(t)
	vk := redisserver.Start(t)
	up := startUpstream(t, nil)
	cfg := config(up.URL, rcv.HTTPURL, "1", false, "  protocol: http\nstore: {type: valkey, valkey: {addrs: ["+vk.Addr+"]}}")
	in := rlproxytest.Start(t, cfg)
	if resp, _ := send(t, in.URL+"/s", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	p := up.lastParent(t)
	id := p[3:35]
	spans := otlpreceiver.Trace(rcv.Wait(t, 20*time.Second, func(s []otlpreceiver.Span) bool {
		return len(otlpreceiver.Trace(s, id)) == 3
	}), id)
	byName := map[string]otlpreceiver.Span{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	srv, store := byName["GET api"], byName["valkey round trip"]
	if srv.SpanID == "" || store.SpanID == "" || store.ParentSpanID != srv.SpanID {
		t.Fatalf("want a store span under the server span: %+v", spans)
	}
	if store.Attrs["rlproxy.store.batch_size"] != "1" || store.Attrs["db.system.name"] != "valkey" || store.Error {
		t.Fatalf("store span: %+v", store)
	}
}

// syncBuffer is a strings.Builder safe for the process log's writers.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
