package proxy_test

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// rewindBody is a request body read again on every iteration (no
// allocation per request, unlike a fresh reader).
type rewindBody struct{ bytes.Reader }

func (*rewindBody) Close() error { return nil }

// BenchmarkEdgeLimits is the cost of each edge limit when configured: a
// 1 KiB POST (Content-Length) on a route without them (plain), with
// max_body_size (a declared length under the limit: one comparison), with
// limit_rate (a rate that never waits: the
// writer's bookkeeping alone), and chunked (no declared length: the body
// is counted, and its upstream request made cancellable) without and with
// max_body_size. Compare allocs/op and ns/op with plain.
func BenchmarkEdgeLimits(b *testing.B) {
	payload := make([]byte, 1024)
	for _, tc := range []struct {
		name, route string
		chunked     bool
	}{
		{"plain", "", false},
		{"max_body_size", ", max_body_size: 1m", false},
		{"limit_rate", ", limit_rate: 1g", false},
		{"plain_chunked", "", true},
		{"max_body_size_chunked", ", max_body_size: 1m", true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := fmt.Sprintf(benchConfigHead, benchUpstream(b)) + "routes:\n  - { name: all, upstream: app" + tc.route + " }\n"
			h := benchApp(b, cfg).Handler()
			body := &rewindBody{}
			req := httptest.NewRequest(http.MethodPost, "http://bench.test/upload", body)
			req.RemoteAddr = net.JoinHostPort("127.0.0.7", "40000")
			req.ContentLength = int64(len(payload))
			if tc.chunked {
				req.ContentLength, req.TransferEncoding = -1, []string{"chunked"}
			}
			w := &benchWriter{h: http.Header{}}
			serve := func() {
				body.Reset(payload)
				w.reset()
				h.ServeHTTP(w, req)
				if w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
			}
			serve() // connects the upstream
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				serve()
			}
		})
	}
}
