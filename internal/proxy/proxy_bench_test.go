package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlproxy/internal/server"
	"rlproxy/internal/testutil/redisserver"
)

// The request hot path in process: server.App's production
// wiring (policy layer, guarded Valkey store, metrics, reverse proxy with
// its transport) driven through proxy.Server.ServeHTTP with a reusable
// ResponseWriter, against a real loopback upstream that answers a fixed
// 13-byte body like bench/upstream. ns/op and allocs/op are rlproxy's own
// cost plus one loopback round trip; compare BenchmarkProxyHotPath/none
// (no policy) with /memory and /valkey to see what the limiter adds.
// Runs with -benchtime 100x in CI.

// benchBody is what the upstream answers (bench/upstream's size).
var benchBody = []byte("hello, world\n")

// benchWriter is an http.ResponseWriter that keeps nothing but the status,
// so the benchmark counts the proxy's allocations rather than a recorder's.
type benchWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *benchWriter) Header() http.Header { return w.h }
func (w *benchWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *benchWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.n += len(b)
	return len(b), nil
}

func (w *benchWriter) reset() {
	clear(w.h)
	w.status, w.n = 0, 0
}

func benchUpstream(b *testing.B) string {
	b.Helper()
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h["Content-Type"] = []string{"text/plain"}
		h["Content-Length"] = []string{"13"}
		_, _ = w.Write(benchBody)
	}))
	up.Start()
	b.Cleanup(up.Close)
	return up.URL
}

// benchApp builds an App (not started: the caller serves its handler)
// from yaml.
func benchApp(b *testing.B, yaml string) *server.App { return benchAppT(b, yaml) }

func benchAppT(t testing.TB, yaml string) *server.App {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rlproxy.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	app, err := server.New(path, server.Options{})
	if err != nil {
		t.Fatalf("building app: %v", err)
	}
	t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
	return app
}

const benchConfigHead = `
listen: "127.0.0.1:0"
admin_listen: ""
upstreams:
  app: { url: "%[1]s" }
  adaptive: { url: "%[1]s", adaptive_concurrency: { max: 100000, initial: 100000 } }
`

const benchPolicy = `
policies:
  bench:
    algorithm: token_bucket
    rate: 1000000r/s
    burst: 1000000
    key: ip
routes:
  - name: all
    match: { path_prefix: / }
    upstream: app
    policies: [bench]
`

func BenchmarkProxyHotPath(b *testing.B) {
	cases := []struct {
		name  string
		store func(b *testing.B) string
		tail  string
		limit bool
	}{
		{"none", nil, "routes:\n  - { name: all, match: { path_prefix: / }, upstream: app }\n", false},
		{"memory", func(*testing.B) string { return "store: { type: memory }\n" }, benchPolicy, true},
		// The cost of adaptive_concurrency when on: a slot taken and freed
		// per request (the gate's lock, a latency sample, the exchange).
		{"memory_adaptive", func(*testing.B) string {
			return "store: { type: memory }\nserver: { priority_classes: [{ name: hi, share: 0.5 }, { name: lo, share: 0.5 }] }\n"
		}, strings.Replace(benchPolicy, "upstream: app", "upstream: adaptive", 1), true},
		{"valkey", func(b *testing.B) string {
			rs := redisserver.Start(b)
			return fmt.Sprintf("store: { type: valkey, valkey: { addrs: [%q] } }\n", rs.Addr)
		}, benchPolicy, true},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			cfg := fmt.Sprintf(benchConfigHead, benchUpstream(b))
			if tc.store != nil {
				cfg += tc.store(b)
			}
			h := benchApp(b, cfg+tc.tail).Handler()
			req := httptest.NewRequest(http.MethodGet, "http://bench.test/api/items?x=1", nil)
			req.RemoteAddr = net.JoinHostPort("127.0.0.7", "40000")
			w := &benchWriter{h: http.Header{}}
			// One request outside the timer: connects the upstream (and Valkey).
			h.ServeHTTP(w, req)
			if w.status != http.StatusOK || w.n != len(benchBody) {
				b.Fatalf("warm-up: status %d, %d body bytes", w.status, w.n)
			}
			//lint:ignore SA1008 the proxy assigns the spec's spelling directly (headers.go), not the canonical "Ratelimit"
			if _, ok := w.h["RateLimit"]; ok != tc.limit {
				b.Fatalf("warm-up: RateLimit header present = %v, want %v", ok, tc.limit)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				w.reset()
				h.ServeHTTP(w, req)
				if w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
			}
		})
	}
}

// BenchmarkProxyRefusal is the refusal path (429 problem+json body, quota
// and Retry-After headers) on the memory store: no upstream round trip.
func BenchmarkProxyRefusal(b *testing.B) {
	cfg := fmt.Sprintf(benchConfigHead, benchUpstream(b)) + `
store: { type: memory }
policies:
  tight:
    algorithm: fixed_window
    limit: 1
    window: 1h
    key: ip
routes:
  - name: all
    match: { path_prefix: / }
    upstream: app
    policies: [tight]
`
	h := benchApp(b, cfg).Handler()
	req := httptest.NewRequest(http.MethodGet, "http://bench.test/api/items", nil)
	req.RemoteAddr = "127.0.0.7:40000"
	w := &benchWriter{h: http.Header{}}
	h.ServeHTTP(w, req) // spends the one request
	w.reset()
	h.ServeHTTP(w, req)
	if w.status != http.StatusTooManyRequests {
		b.Fatalf("second request: status %d, want 429", w.status)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w.reset()
		h.ServeHTTP(w, req)
		if w.status != http.StatusTooManyRequests {
			b.Fatalf("status %d", w.status)
		}
	}
}

// BenchmarkUploadFraming is the cost of closing the client connection
// after every request with Transfer-Encoding (RFC 9112 §6.1 framing,
// proxy.closeAfterFraming): the same 1 KiB POST through a listening
// rlproxy with Content-Length (the connection is kept) and chunked (a new
// connection per request), on the std engine (the HTTP/1.1 engine keeps a
// chunked upload's connection: docs/reference/config.md, Engines).
func BenchmarkUploadFraming(b *testing.B) {
	app := benchApp(b, "server: { engine: std }\n"+fmt.Sprintf(benchConfigHead, benchUpstream(b))+"routes:\n  - { name: all, upstream: app }\n")
	if err := app.Start(); err != nil {
		b.Fatal(err)
	}
	url := "http://" + app.Addr() + "/upload"
	payload := make([]byte, 1024)
	for _, chunked := range []bool{false, true} {
		name := map[bool]string{false: "content-length", true: "chunked"}[chunked]
		b.Run(name, func(b *testing.B) {
			tr := &http.Transport{MaxIdleConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			for range b.N {
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(payload))
				if chunked {
					req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(payload)), -1
				}
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || resp.Close != chunked {
					b.Fatalf("status %d, close %v", resp.StatusCode, resp.Close)
				}
			}
		})
	}
}
