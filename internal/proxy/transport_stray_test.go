package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

const evilResp = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil"

func normal(c net.Conn, req *http.Request) {
	body := "for:" + req.URL.Path
	fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// Each case: the first request (method, /a) gets a misbehaving answer; the
// second request (GET /b), sent once rlproxy's side has acknowledged all
// of it (in its socket, whatever the load), must get its own answer. A "later" case writes its stray part only once
// the client has the first response (idle is closed), so it reaches a
// connection that is idle in the pool.
func TestTransportStrayResponseNotDelivered(t *testing.T) {
	cases := []struct {
		name   string
		method string
		first  func(c net.Conn, idle <-chan struct{})
	}{
		{"more-than-content-length", "GET", func(c net.Conn, _ <-chan struct{}) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"+evilResp)
		}},
		{"head-with-body", "HEAD", func(c net.Conn, _ <-chan struct{}) {
			io.WriteString(c, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(evilResp))+evilResp)
		}},
		{"204-with-body", "GET", func(c net.Conn, _ <-chan struct{}) {
			io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n"+evilResp)
		}},
		{"304-with-body", "GET", func(c net.Conn, _ <-chan struct{}) {
			io.WriteString(c, "HTTP/1.1 304 Not Modified\r\n\r\n"+evilResp)
		}},
		{"unsolicited-later", "GET", func(c net.Conn, idle <-chan struct{}) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
			<-idle
			io.WriteString(c, evilResp)
		}},
		{"408-on-idle-then-close", "GET", func(c net.Conn, idle <-chan struct{}) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
			<-idle
			io.WriteString(c, "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
			c.(*net.TCPConn).CloseWrite()
		}},
		{"chunked-then-extra", "GET", func(c net.Conn, _ <-chan struct{}) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"+evilResp)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			results := map[string]string{}
			for _, which := range []string{"rlproxy", "reference"} {
				idle, wrote := make(chan struct{}), make(chan net.Conn, 1)
				up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader, req *http.Request, n int) bool {
					if req.URL.Path == "/a" {
						tc.first(c, idle)
						select { // a retried /a is answered again, signalled once
						case wrote <- c:
						default:
						}
						return true
					}
					normal(c, req)
					return true
				})
				base := proxyFor(t, which, up.URL)
				c := &http.Client{Transport: &http.Transport{}}
				code1, body1, err1 := tryGet(c, tc.method, base+"/a")
				close(idle)
				// The stray bytes (and FIN) are at rlproxy's idle
				// connection before /b is sent.
				select {
				case uc := <-wrote:
					waitAcked(t, uc)
				case <-time.After(10 * time.Second):
					t.Fatal("the upstream did not finish its answer to /a in 10 s")
				}
				code2, body2, err2 := tryGet(c, "GET", base+"/b")
				results[which] = fmt.Sprintf("first=%d %q %v | second=%d %q %v (upstream conns %d)", code1, trunc(body1), err1, code2, trunc(body2), err2, up.conns.Load())
				if which == "rlproxy" && (code2 != 200 || body2 != "for:/b") {
					t.Errorf("second request got %d %q, want 200 \"for:/b\"", code2, trunc(body2))
				}
			}
			t.Logf("rlproxy:   %s", results["rlproxy"])
			t.Logf("reference: %s", results["reference"])
		})
	}
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return strings.TrimSpace(s)
}
