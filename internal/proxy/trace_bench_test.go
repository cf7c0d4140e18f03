package proxy_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"rlproxy/internal/testutil/otlpreceiver"
)

// BenchmarkProxyTracing is BenchmarkProxyHotPath/memory with tracing off
// and on at sample_ratio 0.01 and 1, exporting over OTLP/gRPC to an
// in-process collector that counts and discards the spans. The on cases'
// ns/op include the batch exporter's work only as far as it competes for
// the CPU; bench/instr.sh counts it whole.
func BenchmarkProxyTracing(b *testing.B) {
	for _, tc := range []struct{ name, ratio string }{{"off", ""}, {"ratio0.01", "0.01"}, {"ratio1", "1"}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := fmt.Sprintf(benchConfigHead, benchUpstream(b)) + "store: { type: memory }\n" + benchPolicy
			var spans atomic.Int64
			if tc.ratio != "" {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				go func() { _ = otlpreceiver.Sink(ln, &spans) }()
				b.Cleanup(func() { _ = ln.Close() })
				cfg += fmt.Sprintf("tracing: { otlp_endpoint: \"http://%s\", sample_ratio: %s, queue_size: 100000 }\n", ln.Addr(), tc.ratio)
			}
			h := benchApp(b, cfg).Handler()
			req := httptest.NewRequest(http.MethodGet, "http://bench.test/api/items?x=1", nil)
			req.RemoteAddr = "127.0.0.7:40000"
			w := &benchWriter{h: http.Header{}}
			h.ServeHTTP(w, req)
			if w.status != http.StatusOK {
				b.Fatalf("warm-up: status %d", w.status)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				w.reset()
				delete(req.Header, "Traceparent")
				h.ServeHTTP(w, req)
				if w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
			}
		})
	}
}
