package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rlproxy/internal/testutil/fleet"
	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// shutdownGet sends GET url through c and returns its status (0 on a
// transport error, with the error).
func shutdownGet(c *http.Client, url string) (int, bool, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, false, err
	}
	return resp.StatusCode, resp.Close, nil
}

// TestShutdownSequence runs a real rlproxy process and sends it SIGTERM,
// then SIGHUP and a second SIGTERM while it drains (shutdown_delay 1 s):
// /readyz is 503 from the first signal; requests on new connections during
// the delay succeed (asked to close their connection); the listener closes
// after the delay, not before; 20 in-flight requests (held at the upstream
// until the listener is closed) and 15 waiting in a leaky bucket all
// succeed; the late signals are logged and ignored, and the process exits 0.
func TestShutdownSequence(t *testing.T) {
	t.Parallel()
	up := rlproxytest.NewUpstream(t)
	release := make(chan struct{})
	up.Handler = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	}
	f := fleet.Start(t, 1, fmt.Sprintf(`
server: { shutdown_delay: 1s, shutdown_timeout: 10s }
upstreams: { app: { url: %q } }
policies: { shape: { algorithm: leaky_bucket, rate: 10r/s, burst: 20, key: global } }
routes:
  - { name: shaped, match: { path: /shaped }, upstream: app, policies: [shape] }
  - { name: all, upstream: app }
`, up.URL))
	p := f.Procs[0]
	var wg sync.WaitGroup
	results := make(chan string, 35)
	launch := func(path string, n int) {
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, _, err := shutdownGet(&http.Client{}, p.URL+path)
				results <- fmt.Sprintf("%s %d %v", path, code, err)
			}()
		}
	}
	launch("/slow", 20)
	launch("/shaped", 15) // waits of 0 to 1.4 s
	waitfor.True(t, "20 requests at the upstream", func() bool { return up.Count() >= 20 })

	sent := time.Now() // before the signal: the delay cannot end before sent + 1 s
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ready := &http.Client{Timeout: time.Second}
	waitfor.True(t, "/readyz 503 after SIGTERM", func() bool {
		code, _, _ := shutdownGet(ready, p.AdminURL+"/readyz")
		return code == http.StatusServiceUnavailable
	})
	if d := time.Since(sent); d > 300*time.Millisecond {
		t.Errorf("/readyz turned 503 %v after SIGTERM, want at once", d)
	}
	// The first SIGTERM was handled (/readyz says so): the later signals
	// arrive during the drain.
	_ = p.Signal(syscall.SIGHUP)
	_ = p.Signal(syscall.SIGTERM)

	// During the delay (until 700 ms after SIGTERM, ≥ 300 ms from its
	// end): new connections are served, each asked to close.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	n := 0
	for ; time.Since(sent) < 700*time.Millisecond; n++ {
		code, closed, err := shutdownGet(fresh, p.URL+"/during")
		if code != http.StatusOK || !closed {
			t.Errorf("request %v after SIGTERM: status %d, Connection: close %v, err %v; want 200 and close", time.Since(sent).Round(time.Millisecond), code, closed, err)
		}
		if code, _, _ := shutdownGet(ready, p.AdminURL+"/readyz"); code != http.StatusServiceUnavailable {
			t.Errorf("/readyz %d during the delay, want 503", code)
		}
	}
	if n == 0 {
		t.Error("no request sent during the delay")
	}
	// At the end of the delay (1 s) the listener closes: connections are
	// refused from then on, and never before the delay has run.
	addr := strings.TrimPrefix(p.URL, "http://")
	var refusedAt time.Duration
	waitfor.True(t, "the listener closed after shutdown_delay", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return false
		}
		refusedAt = time.Since(sent)
		return true
	})
	if refusedAt < time.Second {
		t.Errorf("connection refused %v after SIGTERM, want the listener open for shutdown_delay (1s)", refusedAt.Round(time.Millisecond))
	}
	close(release)

	wg.Wait()
	close(results)
	for r := range results {
		if !strings.HasSuffix(r, " 200 <nil>") {
			t.Errorf("in-flight or waiting request: %s, want 200", r)
		}
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("no exit 10 s after the in-flight requests finished")
	}
	if _, code := p.Exited(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	log := p.Log()
	for _, want := range []string{
		`msg="received SIGTERM: shutting down"`,
		`msg="received SIGHUP while shutting down: ignored"`,
		`msg="received SIGTERM while shutting down: ignored"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
	if strings.Contains(log, "config reload") {
		t.Errorf("a signal while draining reloaded:\n%s", log)
	}
}
