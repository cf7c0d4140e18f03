package config

import (
	"net/url"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// Tracing is `tracing:`: OpenTelemetry traces of the proxied requests,
// exported over OTLP (docs/reference/config.md, "tracing"). It is read at
// start only.
type Tracing struct {
	// OTLPEndpoint is the collector's URL: http:// (plaintext) or
	// https://, host and port; with protocol http the path is the one
	// spans are posted to (default /v1/traces, the OTLP/HTTP path).
	OTLPEndpoint string
	// Protocol is TracingGRPC (OTLP/gRPC, default) or TracingHTTP
	// (OTLP/HTTP protobuf).
	Protocol string
	// SampleRatio is the share of the traces rlproxy starts that it
	// records, 0 to 1 (default 1); a trusted proxy's traceparent decides
	// for its own trace.
	SampleRatio float64
	// ServiceName is the service.name resource attribute (default "rlproxy").
	ServiceName string
	// QueueSize bounds the spans waiting for export (default 2048); a span
	// ended while it is full is dropped and counted, never waited for.
	QueueSize int
	// BatchTimeout is the longest a span waits before its batch is sent
	// (default 5s); ExportTimeout bounds one export, retries included
	// (default 10s).
	BatchTimeout, ExportTimeout time.Duration
}

// tracing.protocol values.
const (
	TracingGRPC = "grpc"
	TracingHTTP = "http"
)

// tracingSection is `tracing:`; present, it turns traces on.
func (l *loader) tracingSection() *section {
	t := &Tracing{}
	endpoint := value{func() schema { return schema{"type": "string", "pattern": "^https?://"} }, func(n *yaml.Node, path string) {
		if s, ok := l.str(n, path); ok {
			if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
				l.errorf(n, path, "%q: want http://HOST:PORT or https://HOST:PORT (the collector's OTLP endpoint)", s)
			} else {
				t.OTLPEndpoint = s
			}
		}
	}}
	ratio := value{func() schema { return schema{"type": "number", "minimum": 0, "maximum": 1} }, func(n *yaml.Node, path string) {
		if v, ok := l.fraction(n, path); ok {
			t.SampleRatio = v
		}
	}}
	return &section{optional: true, fields: []field{
		{name: "otlp_endpoint", need: "required: the collector's OTLP endpoint, e.g. http://127.0.0.1:4317", value: endpoint,
			doc: "Collector's OTLP endpoint: http://HOST:PORT (plaintext) or https://HOST:PORT; with protocol http a path may follow (default /v1/traces)."},
		{name: "protocol", def: TracingGRPC, value: l.enumVal(&t.Protocol, TracingGRPC, TracingHTTP), doc: "OTLP transport: grpc (port 4317 by convention) or http (protobuf over HTTP, port 4318)."},
		{name: "sample_ratio", def: "1", value: ratio,
			doc: "Share of the traces rlproxy starts that are recorded, 0 to 1; a traceparent from a real_ip.trusted_proxies peer decides for its own trace, a client's never."},
		{name: "service_name", def: "rlproxy", value: l.strVal(&t.ServiceName), doc: "The service.name resource attribute of every span."},
		{name: "queue_size", def: "2048", value: l.intVal(&t.QueueSize, 1, 1_000_000),
			doc: "Spans waiting for export; one ended while it is full is dropped (rlproxy_trace_spans_dropped_total), never waited for."},
		{name: "batch_timeout", def: "5s", value: l.durationVal(&t.BatchTimeout, false), doc: "Longest a span waits before its batch is exported."},
		{name: "export_timeout", def: "10s", value: l.durationVal(&t.ExportTimeout, false), doc: "Longest one export may take, retries included; its spans are then dropped."},
	}, check: func(o object) {
		l.tracingCheck(o, t)
	}}
}

// tracingCheck completes t once its fields are decoded: the OTLP/HTTP
// default path, and a path given to gRPC (which has none) refused.
func (l *loader) tracingCheck(o object, t *Tracing) {
	if t.OTLPEndpoint == "" || t.ServiceName == "" {
		if o.has("service_name") && t.ServiceName == "" {
			l.errorf(o.get("service_name"), o.field("service_name"), "must not be empty")
		}
		return
	}
	u, _ := url.Parse(t.OTLPEndpoint)
	switch {
	case t.Protocol == TracingHTTP && (u.Path == "" || u.Path == "/"):
		u.Path = "/v1/traces"
		t.OTLPEndpoint = u.String()
	case t.Protocol == TracingGRPC && u.Path != "" && u.Path != "/":
		l.errorf(o.get("otlp_endpoint"), o.field("otlp_endpoint"), "%q: OTLP over gRPC has no path; want http://HOST:PORT (or protocol: http)", t.OTLPEndpoint)
		return
	}
	l.c.Tracing = t
}

// fraction decodes a number in [0, 1] ("0", "0.01", "1").
func (d *decoder) fraction(n *yaml.Node, path string) (float64, bool) {
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!float" && n.ShortTag() != "!!int") {
		d.errorf(n, path, "%s: want a number from 0 to 1", describe(n))
		return 0, false
	}
	v, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || !(v >= 0 && v <= 1) {
		d.errorf(n, path, "%s: want a number from 0 to 1", n.Value)
		return 0, false
	}
	return v, true
}
