package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/testutil/waitfor"
)

// hammerUpstream answers "ok", holds /hold until release is closed, and
// takes /ws over as an echo tunnel after a 101.
func hammerUpstream(t *testing.T, release <-chan struct{}) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hold":
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-release
		case "/ws":
			c, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
			io.Copy(c, brw)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	return up
}

// writeHammerConfig writes variant i: the store (max_keys), the policy's
// limit and the access log (two files, or none) change with i.
func writeHammerConfig(t *testing.T, dir, upstream string, i int) {
	access := ""
	switch i % 3 {
	case 0:
		access = "  access: { path: " + filepath.Join(dir, "a.log") + " }\n"
	case 1:
		access = "  access: { path: " + filepath.Join(dir, "b.log") + " }\n"
	}
	yaml := fmt.Sprintf(`listen: "127.0.0.1:0"
admin_listen: ""
server:
  shutdown_timeout: 1h
  max_connections_per_client: 0
log:
  level: warn
%sstore:
  type: memory
  max_keys: %d
upstreams:
  app: { url: %q }
policies:
  roomy: { algorithm: fixed_window, limit: %d, window: 1h, key: ip }
  conc: { algorithm: concurrency, limit: 1000, key: ip }
routes:
  - { name: all, upstream: app, policies: [roomy, conc] }
`, access, 1000+i%2, upstream, 1_000_000+i)
	if err := os.WriteFile(filepath.Join(dir, "rlproxy.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReloadHammer: reloads that change the store, the policies and the
// access log, while short requests, held requests and upgraded tunnels
// run: no request fails, every tunnel keeps echoing, and once the long
// ones end every replaced generation is closed (retained back to 0).
func TestReloadHammer(t *testing.T) {
	release := make(chan struct{})
	up := hammerUpstream(t, release)
	dir := t.TempDir()
	writeHammerConfig(t, dir, up.URL, 0)
	a := startGenApp(t, filepath.Join(dir, "rlproxy.yaml"))
	base := "http://" + a.Addr()

	var held sync.WaitGroup
	heldErr := make(chan error, 3)
	for range 3 {
		held.Add(1)
		go func() {
			defer held.Done()
			body, err := getBody(base + "/hold")
			if err == nil && body != "ok" {
				err = fmt.Errorf("held body %q", body)
			}
			if err != nil {
				heldErr <- err
			}
		}()
	}
	tunnels := make([]net.Conn, 2)
	readers := make([]*bufio.Reader, 2)
	for i := range tunnels {
		c, err := net.Dial("tcp", a.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(60 * time.Second))
		io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("tunnel %d: %v %v", i, resp, err)
		}
		tunnels[i], readers[i] = c, br
	}
	echo := func(step int) {
		for i, c := range tunnels {
			msg := fmt.Sprintf("m%d-%d\n", step, i)
			io.WriteString(c, msg)
			got, err := readers[i].ReadString('\n')
			if err != nil || got != msg {
				t.Fatalf("tunnel %d after reload %d: echo %q, %v", i, step, got, err)
			}
		}
	}

	stop := make(chan struct{})
	var sent, failed atomic.Int64
	var firstFail atomic.Value
	var clients sync.WaitGroup
	for range 4 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				sent.Add(1)
				if body, err := getBody(base + "/"); err != nil || body != "ok" {
					failed.Add(1)
					firstFail.CompareAndSwap(nil, fmt.Sprintf("%q %v", body, err))
				}
			}
		}()
	}
	const reloads = 30
	for i := 1; i <= reloads; i++ {
		writeHammerConfig(t, dir, up.URL, i)
		a.Reload("hammer")
		if got := a.Config().Policies["roomy"].Limit.Count; got != int64(1_000_000+i) {
			t.Fatalf("reload %d refused: serving limit %d", i, got)
		}
		if i%5 == 0 {
			echo(i)
		}
	}
	close(stop)
	clients.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d requests failed during reloads; first: %v", n, sent.Load(), firstFail.Load())
	}
	if got := value(a.gens.retained); got == 0 {
		t.Fatalf("generations retained 0 while held requests run, want > 0")
	}
	close(release)
	held.Wait()
	close(heldErr)
	for err := range heldErr {
		t.Fatal(err)
	}
	for _, c := range tunnels {
		c.Close()
	}
	waitRetained(t, a, 0)
	t.Logf("%d requests over %d reloads", sent.Load(), reloads)
	// Reload 30 serves a.log: one descriptor on it, none on b.log.
	if got := openFiles(t, dir); got["a.log"] != 1 || got["b.log"] != 0 {
		t.Errorf("open access log descriptors %v, want a.log once, b.log none", got)
	}
	for _, name := range []string{"a.log", "b.log"} {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		if len(b) == 0 {
			t.Errorf("%s: no line written", name)
		}
	}
}

// TestShutdownDuringReloads: reloads and requests race a shutdown; no
// panic, the shutdown returns, and nothing stays retained.
func TestShutdownDuringReloads(t *testing.T) {
	release := make(chan struct{})
	close(release)
	up := hammerUpstream(t, release)
	dir := t.TempDir()
	writeHammerConfig(t, dir, up.URL, 0)
	a, err := New(filepath.Join(dir, "rlproxy.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + a.Addr()
	var wg sync.WaitGroup
	var reloaded, served atomic.Int64
	done := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 1; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			writeHammerConfig(t, dir, up.URL, i)
			a.Reload("race")
			reloaded.Add(1)
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			_, _ = getBody(base + "/")
			served.Add(1)
		}
	}()
	// Shut down once both have run a while (a condition, not a guess).
	waitfor.True(t, "5 reloads and 5 requests", func() bool { return reloaded.Load() >= 5 && served.Load() >= 5 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	close(done)
	wg.Wait()
	if got := value(a.gens.retained); got != 0 {
		t.Fatalf("generations retained %v after shutdown, want 0", got)
	}
}

// openFiles counts this process's descriptors on files in dir, by name.
func openFiles(t *testing.T, dir string) map[string]int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := map[string]int{}
	for _, e := range ents {
		if p, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && filepath.Dir(p) == dir {
			n[filepath.Base(p)]++
		}
	}
	return n
}
