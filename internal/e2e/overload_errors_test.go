package e2e

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/testutil/rlproxytest"
)

// TestOverloadFastErrors: an upstream with 4 workers (20 ms each) that
// answers 503 at once when they are busy, driven by 64 closed-loop
// clients for 3 s: the adaptive limit stays within 4× its workers. Its
// instant 503s are failures, not latency samples: counted as deliveries
// they pulled the limit to 128 (the upstream then refused 97 % of what it
// was sent).
func TestOverloadFastErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("a load probe")
	}
	var busy atomic.Int64
	var ok, refused atomic.Int64
	up := rlproxytest.NewUpstream(t)
	up.Handler = func(w http.ResponseWriter, r *http.Request) {
		if busy.Add(1) > 4 {
			busy.Add(-1)
			refused.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		time.Sleep(20 * time.Millisecond)
		busy.Add(-1)
		ok.Add(1)
		io.WriteString(w, "ok")
	}
	in := rlproxytest.Start(t, fmt.Sprintf(`
server: { max_connections_per_client: 0 }
upstreams: { app: { url: %q, adaptive_concurrency: { min: 1, max: 1000, initial: 4 } } }
routes: [ { name: r, upstream: app } ]
`, up.URL))
	c := rlproxytest.ClientFrom("127.0.0.1")
	stop := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	var shed atomic.Int64
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				resp, err := c.Get(in.URL + "/")
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" {
					shed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	limit := adaptiveLimit(t, in)
	t.Logf("limit %d; upstream ok %d, upstream 503 %d, shed by rlproxy %d", limit, ok.Load(), refused.Load(), shed.Load())
	if limit > 16 {
		t.Errorf("adaptive limit %d for an upstream of 4 workers, want at most 16", limit)
	}
	if ok.Load() == 0 {
		t.Errorf("the upstream served nothing")
	}
}
