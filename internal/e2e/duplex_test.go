package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// duplexCfg: one route, no limit, to an upstream that answers before it
// reads the request body, on the std engine: the HTTP/1.1 engine sends the
// whole request body before it reads the answer, as nginx does with its
// default proxy_request_buffering (docs/reference/config.md, Engines).
const duplexCfg = `
server: { engine: std }
upstreams: { app: { url: %q } }
policies:
  many: { algorithm: fixed_window, limit: 1000, window: 1m }
routes:
  - { name: api, match: { path_prefix: / }, upstream: app, policies: [many] }
`

// TestRequestBodyFlowsAfterResponseHead: an upstream may answer before it
// has read the request body (here: its head and 64 KiB at once, then the
// body). rlproxy keeps forwarding the body while it streams the answer:
// the client gets the response head while it still holds back the last
// byte of its body, and the upstream receives the whole body. net/http's
// server otherwise consumes and closes an unread request body when the
// handler starts writing its response, so the transport's read of it
// either blocks the answer (a body still arriving, as here) or fails with
// "invalid Read on closed Body", which closes the upstream connection and
// cuts the response being streamed.
func TestRequestBodyFlowsAfterResponseHead(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		w.Header().Set("Content-Length", "65536")
		_, _ = w.Write(make([]byte, 64<<10-1))
		w.(http.Flusher).Flush()
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
		_, _ = w.Write([]byte{'!'})
	}))
	t.Cleanup(up.Close)
	in := e2eStartBehind(t, "memory", up.URL, duplexCfg)

	c, err := net.Dial("tcp", strings.TrimPrefix(in.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST /dup HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\na"); err != nil {
		t.Fatal(err)
	}
	// The head must come while the body is unfinished; a deadline reached
	// is the failure (the head waited for the body).
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response head while the request body is unfinished: %v", err)
	}
	if _, err := io.WriteString(c, "b"); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK || n != 64<<10 || err != nil {
		t.Errorf("response: %d, %d bytes, %v; want 200 and 65536 bytes", resp.StatusCode, n, err)
	}
	select {
	case b := <-got:
		if b != "ab" {
			t.Errorf("upstream received body %q, want %q", b, "ab")
		}
	case <-time.After(10 * time.Second):
		t.Error("the upstream did not receive the request body")
	}
}
