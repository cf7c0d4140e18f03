package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"rlproxy/internal/testutil/nginxtest"
	"rlproxy/internal/testutil/rlproxytest"
)

// TestNginxLimitRateDifferential downloads 4 MiB through nginx 1.22 with
// `limit_rate 1m; limit_rate_after 256k` and through rlproxy with
// `limit_rate: 1m, limit_rate_after: 256k`, both at once in one run, and
// wants rlproxy's total time within 10 % of nginx's (each about 3.75 s:
// the 3.75 MiB past the allowance at 1 MiB/s), and the body whole.
func TestNginxLimitRateDifferential(t *testing.T) {
	if nginxtest.Binary() == "" && os.Getenv("RLPROXY_REQUIRE_NGINX") != "1" {
		t.Skip("skipping: nginx not installed")
	}
	const size = 4 << 20
	payload := make([]byte, size)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(size))
		_, _ = w.Write(payload)
	}))
	t.Cleanup(up.Close)
	ngx := nginxtest.Start(t, fmt.Sprintf(`
    server {
        listen {{listen}};
        location / { proxy_pass %s; limit_rate 1m; limit_rate_after 256k; }
    }`, up.URL))
	in := rlproxytest.Start(t, fmt.Sprintf(`
upstreams: { app: { url: %q } }
routes:
  - { name: dl, match: { path_prefix: / }, upstream: app, limit_rate: 1m, limit_rate_after: 256k }
`, up.URL))

	took := map[string]time.Duration{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, url := range map[string]string{"nginx": ngx.URL, "rlproxy": in.URL} {
		wg.Go(func() {
			start := time.Now()
			resp, err := http.Get(url + "/file")
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			d := time.Since(start)
			if err != nil || n != size {
				t.Errorf("%s: read %d bytes (%v), want %d", name, n, err, size)
			}
			mu.Lock()
			took[name] = d
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	ratio := float64(took["rlproxy"]) / float64(took["nginx"])
	t.Logf("4 MiB at limit_rate 1m after 256k: nginx %v, rlproxy %v (ratio %.3f)", took["nginx"], took["rlproxy"], ratio)
	if ratio < 0.9 || ratio > 1.1 {
		t.Errorf("rlproxy took %v, nginx %v: ratio %.3f, want within 10 %%", took["rlproxy"], took["nginx"], ratio)
	}
}

// TestLimitRateStreamsEvents: on a route with limit_rate, server-sent
// events still stream: each small event arrives when it is sent, not when
// a buffer fills or the rate's second is over.
func TestLimitRateStreamsEvents(t *testing.T) {
	next := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for i := range 3 {
			<-next
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(up.Close)
	in := rlproxytest.Start(t, fmt.Sprintf(`
upstreams: { app: { url: %q } }
routes:
  - { name: sse, match: { path_prefix: / }, upstream: app, limit_rate: 1k }
`, up.URL))
	client := &http.Client{Timeout: 10 * time.Second} // a held event fails the read, not the run
	resp, err := client.Get(in.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		next <- struct{}{}
		line, err := br.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != fmt.Sprintf("data: %d", i) {
			t.Fatalf("event %d: %q, %v", i, line, err)
		}
		_, _ = br.ReadString('\n')
	}
}
