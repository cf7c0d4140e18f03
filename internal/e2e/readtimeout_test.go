package e2e

// Upstream faults after and before the response head: read_timeout
// (nginx proxy_read_timeout) cuts a body that stalls, server-sent events
// follow server.stream_idle_timeout, and every 502 and 504 the upstream
// caused is counted in rlproxy_upstream_errors_total.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/testutil/rlproxytest"
)

// readTimeoutCfg: read_timeout 2 s (the default is 60 s), event streams
// bounded by stream_idle_timeout 5 s, and a concurrency limit of 1 on the
// route, whose lease a cut response must give back at once.
const readTimeoutCfg = `
server: { stream_idle_timeout: 5s }
upstreams: { app: { url: %q, read_timeout: 2s, response_header_timeout: 1s } }
policies:
  one: { algorithm: concurrency, limit: 1 }
routes:
  - { name: api, match: { path_prefix: / }, upstream: app, policies: [one] }
`

// readTimeoutUpstream answers /stall with a head and 64 KiB, then stalls
// (up to 100 s, until the test ends), recording when it began writing the
// 64 KiB (before rlproxy's last read of them, so a cut measured from it is
// never early by however late this goroutine ran after the flush);
// /trickle with a chunk each second for 4 s (never a 2 s pause); /sse
// with an event every 3 s, 3 times (past read_timeout, within
// stream_idle_timeout); /slowhead with no head until rlproxy gives up;
// /reset by resetting the connection (SO_LINGER 0); anything else with
// "ok".
type readTimeoutUpstream struct {
	*rlproxytest.Upstream
	stalled atomic.Int64 // UnixNano when /stall began writing its 64 KiB
	release chan struct{}
}

func newReadTimeoutUpstream(t *testing.T) *readTimeoutUpstream {
	u := &readTimeoutUpstream{Upstream: rlproxytest.NewUpstream(t), release: make(chan struct{})}
	t.Cleanup(func() { close(u.release) }) // before the server's Close (LIFO)
	u.Handler = func(w http.ResponseWriter, r *http.Request) {
		f := w.(http.Flusher)
		switch r.URL.Path {
		case "/stall":
			w.Header().Set("Content-Length", fmt.Sprint(128<<10))
			u.stalled.Store(time.Now().UnixNano())
			_, _ = w.Write(make([]byte, 64<<10))
			f.Flush()
			select {
			case <-u.release:
			case <-time.After(100 * time.Second):
			}
		case "/trickle":
			for range 4 {
				_, _ = io.WriteString(w, "chunk\n")
				f.Flush()
				time.Sleep(time.Second)
			}
		case "/sse":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				_, _ = fmt.Fprintf(w, "data: beat %d\n\n", i)
				f.Flush()
				time.Sleep(3 * time.Second)
			}
		case "/slowhead":
			// No head until rlproxy gives up on it (its cancel closes the
			// connection) or the test ends: response_header_timeout is the
			// only thing that can end this request.
			select {
			case <-r.Context().Done():
			case <-u.release:
			}
		case "/reset":
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = c.(*net.TCPConn).SetLinger(0)
				_ = c.Close()
			}
		default:
			_, _ = io.WriteString(w, "ok")
		}
	}
	return u
}

// upstreamErrors returns route api's rlproxy_upstream_errors_total.
func upstreamErrors(t *testing.T, in *rlproxytest.Instance) float64 {
	t.Helper()
	_, s := opsScrape(t, in)
	return opsValue(t, s, "rlproxy_upstream_errors_total", "route", "api")
}

// TestUpstreamReadTimeout: a body that stalls after 64 KiB is cut 2 s
// (read_timeout) after its last byte, the client connection is closed, the
// concurrency lease is free at once and the cut is an upstream error; a
// body that keeps flowing and an event stream whose heartbeat is rarer
// than read_timeout but within stream_idle_timeout are not cut.
func TestUpstreamReadTimeout(t *testing.T) {
	t.Parallel()
	up := newReadTimeoutUpstream(t)
	in := e2eStartBehind(t, "memory", up.URL, readTimeoutCfg)
	c := rlproxytest.ClientFrom("127.0.0.31")

	// The body-less GET takes the direct transport, the POST (with a body)
	// http.Transport: both are cut.
	for i, method := range []string{http.MethodGet, http.MethodPost} {
		readTimeoutStall(t, in, up, c, method)
		if got := upstreamErrors(t, in); got != float64(i+1) {
			t.Errorf("rlproxy_upstream_errors_total{route=api} = %v after the %s cut, want %d", got, method, i+1)
		}
	}
	for _, path := range []string{"/trickle", "/sse"} {
		r, body := rlproxytest.Get(t, c, in.URL+path)
		if r.StatusCode != http.StatusOK || strings.Count(body, "\n") < 3 {
			t.Errorf("%s: %d %q, want 200 and the whole body", path, r.StatusCode, body)
		}
	}
	if got := upstreamErrors(t, in); got != 2 {
		t.Errorf("rlproxy_upstream_errors_total{route=api} = %v after /trickle and /sse, want still 2", got)
	}
}

// readTimeoutStall requests /stall with method (a POST with a body "x")
// and checks the cut: the 64 KiB arrive, then the connection closes 2 s
// (+1 s) after the stall began, and the route's concurrency lease is free
// at once.
func readTimeoutStall(t *testing.T, in *rlproxytest.Instance, up *readTimeoutUpstream, c *http.Client, method string) {
	t.Helper()
	var reqBody io.Reader
	if method == http.MethodPost {
		reqBody = strings.NewReader("x")
	}
	req, _ := http.NewRequest(method, in.URL+"/stall", reqBody)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	cut := time.Now()
	resp.Body.Close()
	if err == nil || n != 64<<10 {
		t.Fatalf("%s stalled body: %d bytes, err %v; want 65536 bytes and a cut connection", method, n, err)
	}
	// The lease is given back before the connection closes: the next
	// request is admitted at once.
	r2, body := rlproxytest.Get(t, c, in.URL+"/fast")
	if r2.StatusCode != http.StatusOK || body != "ok" {
		t.Errorf("request right after the %s cut: %d %q, want 200 ok (lease still held?)", method, r2.StatusCode, body)
	}
	after := cut.Sub(time.Unix(0, up.stalled.Load()))
	t.Logf("%s: stalled body cut %v after its last byte (read_timeout 2s)", method, after.Round(time.Millisecond))
	if after < 2*time.Second || after > 3*time.Second {
		t.Errorf("%s: cut %v after the stall began, want 2s..3s", method, after)
	}
}

// TestUpstreamErrorsCounted: a 504 (no head within
// response_header_timeout) and a 502 (the upstream reset the connection)
// are each counted in rlproxy_upstream_errors_total, the 504 also as
// rlproxy_proxy_errors_total{reason="upstream_timeout"}.
func TestUpstreamErrorsCounted(t *testing.T) {
	t.Parallel()
	up := newReadTimeoutUpstream(t)
	in := e2eStartBehind(t, "memory", up.URL, readTimeoutCfg)
	c := rlproxytest.ClientFrom("127.0.0.32")
	for i, tc := range []struct {
		path string
		want int
	}{{"/slowhead", http.StatusGatewayTimeout}, {"/reset", http.StatusBadGateway}} {
		r, _ := rlproxytest.Get(t, c, in.URL+tc.path)
		if r.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.path, r.StatusCode, tc.want)
		}
		if got := upstreamErrors(t, in); got != float64(i+1) {
			t.Errorf("after %s: rlproxy_upstream_errors_total = %v, want %d", tc.path, got, i+1)
		}
	}
	_, s := opsScrape(t, in)
	if got := opsValue(t, s, "rlproxy_proxy_errors_total", "route", "api", "reason", "upstream_timeout"); got != 1 {
		t.Errorf(`rlproxy_proxy_errors_total{reason="upstream_timeout"} = %v, want 1`, got)
	}
}
