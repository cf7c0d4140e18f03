package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/rlproxytest"
)

// TestSlowUpstreamFirstRequest: the first request of a client
// connection, whose upstream answers after server.read_header_timeout (1 s
// here) but well within response_header_timeout (10 s), gets the
// upstream's 200: the client never left, though its socket's read
// deadline passed while it waited (the engine's check of a client gone
// must not read that as a close).
func TestSlowUpstreamFirstRequest(t *testing.T) {
	up := rlproxytest.NewUpstream(t)
	up.Handler = func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2500 * time.Millisecond) // a slow upstream
		io.WriteString(w, "slow ok")
	}
	in := rlproxytest.Start(t, fmt.Sprintf(`
server: { read_header_timeout: 1s }
upstreams: { app: { url: %q, response_header_timeout: 10s } }
routes:
  - { name: api, match: { path_prefix: / }, upstream: app }
`, up.URL))
	c := &http.Client{Transport: &http.Transport{}}
	start := time.Now()
	resp, err := c.Get(in.URL + "/")
	if err != nil {
		t.Fatalf("GET after %v: %v, want 200 \"slow ok\"", time.Since(start), err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "slow ok" {
		t.Fatalf("GET: %d %q after %v, want 200 \"slow ok\"", resp.StatusCode, b, time.Since(start))
	}
}

// TestSlowUpstreamLaterRequest: as TestSlowUpstreamFirstRequest
// for a keep-alive connection's second request, the upstream answering
// after server.idle_timeout (1 s).
func TestSlowUpstreamLaterRequest(t *testing.T) {
	up := rlproxytest.NewUpstream(t)
	up.Handler = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(2500 * time.Millisecond) // a slow upstream
		}
		io.WriteString(w, "ok "+r.URL.Path)
	}
	in := rlproxytest.Start(t, fmt.Sprintf(`
server: { idle_timeout: 1s }
upstreams: { app: { url: %q, response_header_timeout: 10s } }
routes:
  - { name: api, match: { path_prefix: / }, upstream: app }
`, up.URL))
	c, err := net.Dial("tcp", strings.TrimPrefix(in.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for _, path := range []string{"/fast", "/slow"} {
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != "ok "+path {
			t.Fatalf("%s: %d %q, want 200 %q", path, resp.StatusCode, b, "ok "+path)
		}
	}
}
