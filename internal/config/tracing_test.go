package config

import (
	"strings"
	"testing"
	"time"
)

// tracingConfig parses a config whose tracing section is section's lines.
func tracingConfig(section string) (*Config, error) {
	src := "tracing:\n" + section + "upstreams: { app: { builtin: echo } }\nroutes: [{ name: r, upstream: app }]\n"
	return ParseWith("x.yaml", []byte(src), LoadOptions{})
}

// TestTracing: absent is off; present takes its defaults (gRPC, every
// trace, service rlproxy) and completes an OTLP/HTTP endpoint's path.
func TestTracing(t *testing.T) {
	c, err := ParseWith("x.yaml", []byte("upstreams: { app: { builtin: echo } }\nroutes: [{ name: r, upstream: app }]\n"), LoadOptions{})
	if err != nil || c.Tracing != nil {
		t.Fatalf("absent: %+v, %v; want off (nil)", c.Tracing, err)
	}
	c, err = tracingConfig("  otlp_endpoint: http://otel:4317\n")
	if err != nil {
		t.Fatal(err)
	}
	want := Tracing{OTLPEndpoint: "http://otel:4317", Protocol: TracingGRPC, SampleRatio: 1, ServiceName: "rlproxy",
		QueueSize: 2048, BatchTimeout: 5 * time.Second, ExportTimeout: 10 * time.Second}
	if *c.Tracing != want {
		t.Fatalf("defaults: %+v, want %+v", *c.Tracing, want)
	}
	c, err = tracingConfig("  otlp_endpoint: https://otel:4318\n  protocol: http\n  sample_ratio: 0\n  service_name: edge\n")
	if err != nil {
		t.Fatal(err)
	}
	if tr := c.Tracing; tr.OTLPEndpoint != "https://otel:4318/v1/traces" || tr.SampleRatio != 0 || tr.ServiceName != "edge" {
		t.Fatalf("http: %+v", *tr)
	}
}

// TestTracingMistakes: each mistake is named with its file and line.
func TestTracingMistakes(t *testing.T) {
	for _, tt := range []struct{ name, section, want string }{
		{"no endpoint", "  protocol: grpc\n", `x.yaml:1: tracing.otlp_endpoint: required: the collector's OTLP endpoint, e.g. http://127.0.0.1:4317`},
		{"bare host", "  otlp_endpoint: otel:4317\n", `x.yaml:2: tracing.otlp_endpoint: "otel:4317": want http://HOST:PORT or https://HOST:PORT (the collector's OTLP endpoint)`},
		{"grpc path", "  otlp_endpoint: http://otel:4317/v1/traces\n", `x.yaml:2: tracing.otlp_endpoint: "http://otel:4317/v1/traces": OTLP over gRPC has no path; want http://HOST:PORT (or protocol: http)`},
		{"protocol", "  otlp_endpoint: http://otel:4317\n  protocol: thrift\n", `x.yaml:3: tracing.protocol: "thrift": want grpc or http`},
		{"ratio above 1", "  otlp_endpoint: http://otel:4317\n  sample_ratio: 1.5\n", `x.yaml:3: tracing.sample_ratio: 1.5: want a number from 0 to 1`},
		{"ratio text", "  otlp_endpoint: http://otel:4317\n  sample_ratio: all\n", `x.yaml:3: tracing.sample_ratio: "all": want a number from 0 to 1`},
		{"queue", "  otlp_endpoint: http://otel:4317\n  queue_size: 0\n", `x.yaml:3: tracing.queue_size: 0: want a whole number from 1 to 1000000`},
		{"empty service", "  otlp_endpoint: http://otel:4317\n  service_name: \"\"\n", `x.yaml:3: tracing.service_name: must not be empty`},
		{"unknown field", "  otlp_endpoint: http://otel:4317\n  endpoint: x\n", `x.yaml:3: tracing.endpoint: unknown field "endpoint"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tracingConfig(tt.section)
			if err == nil {
				t.Fatalf("no error, want %s", tt.want)
			}
			if got := err.Error(); !strings.HasPrefix(got, tt.want) {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
