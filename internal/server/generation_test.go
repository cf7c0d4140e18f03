package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"rlproxy/internal/testutil/waitfor"
)

// holdingUpstream answers /hold only once the test closes release,
// signalling started when such a request arrives; other paths answer at once.
func holdingUpstream(t *testing.T, started chan<- struct{}, release <-chan struct{}) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			started <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	return up
}

// writeGenConfig writes the config served in the generation tests: a
// memory store of maxKeys keys (a change builds a new store) in front of
// upstream, replaced generations capped at shutdownTimeout.
func writeGenConfig(t *testing.T, path, upstream string, maxKeys int, shutdownTimeout string) {
	t.Helper()
	yaml := fmt.Sprintf(`listen: "127.0.0.1:0"
admin_listen: ""
server:
  shutdown_timeout: %s
store:
  type: memory
  max_keys: %d
upstreams:
  app: { url: %q }
routes:
  - name: all
    upstream: app
`, shutdownTimeout, maxKeys, upstream)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startGenApp starts an App on path and shuts it down at the end.
func startGenApp(t *testing.T, path string) *App {
	t.Helper()
	a, err := New(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	return a
}

// getBody GETs url and returns the body read to its end, or the error.
func getBody(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// waitRetained waits (up to waitfor.Timeout) for rlproxy_config_generations_retained
// to read want.
func waitRetained(t *testing.T, a *App, want float64) {
	t.Helper()
	waitfor.True(t, fmt.Sprintf("generations retained = %v", want), func() bool { return value(a.gens.retained) == want })
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestReloadKeepsGenerationsWhileRequestRuns: a request that began under
// the first configuration holds it, and the five configurations swapped
// in after it (closed in order), until it ends — not for a timer
// (shutdown_timeout is an hour) — and then every replaced store is closed
// at once, the current one kept.
func TestReloadKeepsGenerationsWhileRequestRuns(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	up := holdingUpstream(t, started, release)
	path := filepath.Join(t.TempDir(), "rlproxy.yaml")
	writeGenConfig(t, path, up.URL, 1000, "1h")
	a := startGenApp(t, path)
	base := "http://" + a.Addr()

	held := make(chan error, 1)
	go func() {
		body, err := getBody(base + "/hold")
		if err == nil && body != "ok" {
			err = fmt.Errorf("held request's body %q, want ok", body)
		}
		held <- err
	}()
	<-started
	var old []*generation
	for i := 1; i <= 5; i++ {
		old = append(old, a.gens.current())
		writeGenConfig(t, path, up.URL, 1000+i, "1h") // a new store each time
		a.Reload("test")
		if got := a.Config().Store.MaxKeys; got != 1000+i {
			t.Fatalf("reload %d: serving max_keys %d, want %d", i, got, 1000+i)
		}
		if body, err := getBody(base + "/"); err != nil || body != "ok" {
			t.Fatalf("reload %d: request after it: %q, %v", i, body, err)
		}
	}
	if got := value(a.gens.retained); got != 5 {
		t.Fatalf("while the request runs: generations retained %v, want 5", got)
	}
	for i, g := range old {
		if isClosed(g.closed) || g.store.refs.Load() != 1 {
			t.Fatalf("while the request runs: generation %d closed %v, store holders %d; want open, 1", i, isClosed(g.closed), g.store.refs.Load())
		}
	}

	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	waitRetained(t, a, 0)
	for i, g := range old {
		if !isClosed(g.closed) || g.store.refs.Load() != 0 {
			t.Fatalf("after the request: generation %d closed %v, store holders %d; want closed, 0", i, isClosed(g.closed), g.store.refs.Load())
		}
	}
	if cur := a.gens.current(); isClosed(cur.closed) || cur.store.refs.Load() != 1 || cur.refs.Load() != 1 {
		t.Fatalf("current generation: closed %v, store holders %d, refs %d; want open, 1, 1", isClosed(cur.closed), cur.store.refs.Load(), cur.refs.Load())
	}
}

// TestReloadCapsRetainedGeneration: a request that never ends keeps the
// generation it began under only until server.shutdown_timeout after the
// reload that replaced it; then it is closed under the request.
func TestReloadCapsRetainedGeneration(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	up := holdingUpstream(t, started, release)
	path := filepath.Join(t.TempDir(), "rlproxy.yaml")
	writeGenConfig(t, path, up.URL, 1000, "300ms")
	a := startGenApp(t, path)
	t.Cleanup(func() { close(release) }) // before the Shutdown registered earlier

	held := make(chan error, 1)
	go func() { _, err := getBody("http://" + a.Addr() + "/hold"); held <- err }()
	<-started
	first := a.gens.current()
	writeGenConfig(t, path, up.URL, 1001, "300ms")
	a.Reload("test")
	if got := value(a.gens.retained); got != 1 {
		t.Fatalf("after the reload: generations retained %v, want 1", got)
	}
	waitRetained(t, a, 0)
	if !isClosed(first.closed) || first.store.refs.Load() != 0 {
		t.Fatalf("after shutdown_timeout: first generation closed %v, store holders %d; want closed, 0", isClosed(first.closed), first.store.refs.Load())
	}
	if first.refs.Load() != 1 {
		t.Fatalf("the held request's count on the first generation %d, want 1 (still running)", first.refs.Load())
	}
	select {
	case err := <-held:
		t.Fatalf("the held request ended (%v): the cap must close the generation, not the request", err)
	default:
	}
}

// TestReloadAfterShutdown: a reload that arrives once shutdown has closed
// every generation changes nothing (it must not publish onto closed ones).
func TestReloadAfterShutdown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rlproxy.yaml")
	writeGenConfig(t, path, "http://127.0.0.1:9", 1000, "1s")
	a := startGenApp(t, path)
	if err := a.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	writeGenConfig(t, path, "http://127.0.0.1:9", 1001, "1s")
	a.Reload("test")
	if got := a.Config().Store.MaxKeys; got != 1000 {
		t.Fatalf("after shutdown a reload served max_keys %d, want the running 1000", got)
	}
	if got := value(a.gens.retained); got != 0 {
		t.Fatalf("generations retained %v after shutdown, want 0", got)
	}
}
