package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/rlproxytest"
)

// TestBodyTimeout: server.body_timeout (nginx client_body_timeout) cuts a
// client that stops sending its body — 408 problem+json within the timeout
// (300 ms) plus margin — while a slow body that keeps flowing (a chunk
// every 100 ms for 1 s, longer than the timeout in all) goes through.
func TestBodyTimeout(t *testing.T) {
	up := rlproxytest.NewUpstream(t)
	in := rlproxytest.Start(t, fmt.Sprintf(`
server: { body_timeout: 300ms }
upstreams: { app: { url: %q } }
routes:
  - { name: all, upstream: app }
`, up.URL))
	addr := strings.TrimPrefix(in.URL, "http://")

	stalled, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	start := time.Now()
	fmt.Fprintf(stalled, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
	_ = stalled.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(stalled), nil)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("stalled body: no response (%v) after %v", err, took)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("stalled body: %d %s, want 408 application/problem+json", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if took < 250*time.Millisecond || took > 900*time.Millisecond {
		t.Fatalf("stalled body answered after %v, want about the 300 ms timeout", took)
	}

	flowing, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer flowing.Close()
	fmt.Fprintf(flowing, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
	for range 10 {
		time.Sleep(100 * time.Millisecond)
		fmt.Fprint(flowing, "0123456789")
	}
	_ = flowing.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err = http.ReadResponse(bufio.NewReader(flowing), nil)
	if err != nil {
		t.Fatalf("flowing body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("flowing body (1 s in all, never idle 300 ms): status %d, want 200", resp.StatusCode)
	}
}
