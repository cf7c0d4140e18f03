package proxy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/testutil/waitfor"
)

// After a burst opened N connections, a light steady load (well under one
// request in flight) should let the surplus idle connections expire after
// IdleConnTimeout, as http.Transport (LIFO reuse) does. FIFO reuse keeps
// touching every idle connection, so none ever expires.
func TestDirectTransportIdlePoolShrinks(t *testing.T) {
	const burst = 8
	const idle = 400 * time.Millisecond
	run := func(name string, mk func(u *url.URL) (http.RoundTripper, func())) {
		var open, arrived atomic.Int64
		gate := make(chan struct{})
		up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/burst" {
				arrived.Add(1)
				<-gate
			}
			io.WriteString(w, "ok")
		}))
		up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				open.Add(1)
			case http.StateClosed, http.StateHijacked:
				open.Add(-1)
			}
		}
		up.Start()
		defer up.Close()
		u, _ := url.Parse(up.URL)
		tr, closeFn := mk(u)
		defer closeFn()
		do := func(path string) {
			req, _ := http.NewRequest(http.MethodGet, up.URL+path, nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		var wg sync.WaitGroup
		for range burst {
			wg.Add(1)
			go func() { defer wg.Done(); do("/burst") }()
		}
		// Every burst request held at the upstream at once: burst
		// connections are open.
		waitfor.True(t, "the whole burst at the upstream", func() bool { return arrived.Load() == burst })
		close(gate)
		wg.Wait()
		// Trickle: one request every 80 ms for 2 s (5 idle timeouts).
		for range 25 {
			do("/t")
			time.Sleep(80 * time.Millisecond)
		}
		t.Logf("%s: upstream connections open after trickle: %d", name, open.Load())
		if open.Load() > 2 {
			t.Errorf("%s: %d upstream connections still open under a trickle of 1 request/80ms with IdleConnTimeout %v (http.Transport keeps 1)", name, open.Load(), idle)
		}
	}
	run("http.Transport", func(u *url.URL) (http.RoundTripper, func()) {
		tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: idle}
		return tr, tr.CloseIdleConnections
	})
	run("directTransport", func(u *url.URL) (http.RoundTripper, func()) {
		dt := newDirectTransport(u, &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: idle})
		return dt, dt.Close
	})
}
