package proxy_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Stray bytes (an extra CRLF) after every response are never read as the
// next request's response: each request gets its own answer (rlproxy drops
// the connection; the reference, http.Transport, is logged alongside).
func TestTransportBytesAfterBody(t *testing.T) {
	for _, which := range []string{"rlproxy", "reference"} {
		wrote := make(chan net.Conn, 8)
		up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader, req *http.Request, n int) bool {
			body := "for:" + req.URL.Path
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s\r\n", len(body), body)
			wrote <- c
			return true
		})
		base := proxyFor(t, which, up.URL)
		c := &http.Client{Transport: &http.Transport{}}
		var got []string
		for i := range 3 {
			code, body, err := tryGet(c, "GET", fmt.Sprintf("%s/%d", base, i))
			got = append(got, fmt.Sprintf("%d %q %v", code, trunc(body), err))
			// The next request goes out once the proxy's side has
			// acknowledged this answer with its extra CRLF: the CRLF is
			// then at the proxy's idle connection.
			select {
			case uc := <-wrote:
				waitAcked(t, uc)
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: the upstream did not answer request %d in 10 s", which, i)
			}
		}
		t.Logf("%s: %v (conns %d)", which, got, up.conns.Load())
		for i, g := range got {
			if want := fmt.Sprintf("200 %q <nil>", fmt.Sprintf("for:/%d", i)); which == "rlproxy" && g != want {
				t.Errorf("rlproxy: response %d: %s, want %s", i, g, want)
			}
		}
	}
}

// A stale idle connection and a request whose header does not fit the
// 4 KiB write buffer is retried like a small one: no 502.
func TestTransportStaleConnectionBigRequestHeader(t *testing.T) {
	for _, which := range []string{"rlproxy", "reference"} {
		up := newCountedUpstream(t, hello)
		base := proxyFor(t, which, up.URL)
		c := &http.Client{Transport: &http.Transport{}}
		var fails []string
		for i := range 10 {
			req, _ := http.NewRequest("GET", base+"/x", nil)
			req.Header.Set("Cookie", strings.Repeat("c", 64<<10))
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				fails = append(fails, fmt.Sprintf("req %d: %d", i, resp.StatusCode))
			}
			up.closeConns(t)
		}
		t.Logf("%s: failures %v; upstream served %d", which, fails, up.requests.Load())
		if which == "rlproxy" && len(fails) > 0 {
			t.Errorf("rlproxy: %d of 10 requests failed after a stale connection: %v", len(fails), fails)
		}
	}
}
