package server

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPriorityHeaderStrippedWithoutGate: server.priority_header is
// believed from real_ip.trusted_proxies only and removed from anyone
// else's request, on every route — also one whose upstream has no
// adaptive_concurrency, and an upgrade — so a client cannot pick its
// class at a next rlproxy that trusts this one.
func TestPriorityHeaderStrippedWithoutGate(t *testing.T) {
	var mu sync.Mutex
	var got []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Path+"="+strings.Join(r.Header.Values("X-Priority"), ","))
		mu.Unlock()
		w.Write([]byte("ok"))
	}))
	t.Cleanup(up.Close)
	path := filepath.Join(t.TempDir(), "rlproxy.yaml")
	yaml := fmt.Sprintf(`listen: "127.0.0.1:0"
admin_listen: ""
server:
  priority_classes: [{ name: high, share: 0.5 }, { name: low, share: 0.5 }]
  priority_header: x-priority
upstreams:
  plain: { url: %q }
  gated: { url: %q, adaptive_concurrency: { min: 1, max: 10 } }
routes:
  - { name: gated, upstream: gated, match: { path_prefix: /gated } }
  - { name: plain, upstream: plain }
`, up.URL, up.URL)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startGenApp(t, path)
	for _, p := range []string{"/gated", "/plain"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+a.Addr()+p, nil)
		req.Header.Set("X-Priority", "high")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// An upgrade skips the gate: its header must go all the same.
	c, err := net.DialTimeout("tcp", a.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET /upgrade HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\nX-Priority: high\r\n\r\n")
	buf := make([]byte, 512)
	c.Read(buf) // the upstream refuses the upgrade with its 200; the request reached it
	mu.Lock()
	defer mu.Unlock()
	want := []string{"/gated=", "/plain=", "/upgrade="}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("upstream saw %q, want %q (the untrusted client's X-Priority removed)", got, want)
	}
}
