package server

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeAdaptiveConfig writes an upstream held to one request in flight
// (adaptive_concurrency min = max = 1) behind a policy of limit.
func writeAdaptiveConfig(t *testing.T, path, upstream string, limit int) {
	t.Helper()
	yaml := fmt.Sprintf(`listen: "127.0.0.1:0"
admin_listen: ""
server: { shutdown_timeout: 1h, max_connections_per_client: 0 }
upstreams:
  app: { url: %q, adaptive_concurrency: { min: 1, max: 1, initial: 1, queue_timeout: 100ms } }
policies:
  roomy: { algorithm: fixed_window, limit: %d, window: 1h, key: ip }
routes:
  - { name: all, upstream: app, policies: [roomy] }
`, upstream, limit)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReloadKeepsAdaptiveGate: a reload that leaves an upstream's
// adaptive_concurrency and the priority classes alone keeps its gate —
// its learned limit and the requests in flight under it. A new gate per
// reload let max: 1 admit a second request beside one still running.
func TestReloadKeepsAdaptiveGate(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	up := holdingUpstream(t, started, release)
	path := filepath.Join(t.TempDir(), "rlproxy.yaml")
	writeAdaptiveConfig(t, path, up.URL, 1000)
	a := startGenApp(t, path)
	t.Cleanup(func() { close(release) })
	base := "http://" + a.Addr()
	go getBody(base + "/hold")
	<-started

	writeAdaptiveConfig(t, path, up.URL, 1001) // the policy alone changes
	a.Reload("test")
	if got := a.Config().Policies["roomy"].Limit.Count; got != 1001 {
		t.Fatalf("reload refused: limit %d", got)
	}
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second request beside the held one after a reload: %d, want 503 (adaptive max 1)", resp.StatusCode)
	}
	// A changed adaptive_concurrency is a new gate: max 2 admits it.
	writeAdaptiveConfig(t, path, up.URL, 1001)
	b, _ := os.ReadFile(path)
	os.WriteFile(path, []byte(strings.Replace(string(b), "max: 1,", "max: 2,", 1)), 0o600)
	a.Reload("test")
	if body, err := getBody(base + "/"); err != nil || body != "ok" {
		t.Fatalf("after max: 2, the second request: %q, %v; want ok", body, err)
	}
}
