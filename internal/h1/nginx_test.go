package h1

import (
	"bufio"
	"io"
	"net"
	"slices"
	"strings"
	"testing"

	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/nginxtest"
)

// headRecorder is a raw upstream that records the head of each request
// as it arrives, byte for byte, and answers 204.
type headRecorder struct {
	addr  string
	heads chan string
}

func newHeadRecorder(t *testing.T) *headRecorder {
	r := &headRecorder{heads: make(chan string, 16)}
	r.addr = netutil.ServeConns(t, r.serve)
	return r
}

func (r *headRecorder) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		var head strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			head.WriteString(line)
			if line == "\r\n" {
				break
			}
		}
		r.heads <- head.String()
		io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
	}
}

// fieldLines returns a head's field lines but those named in skip
// (lower case).
func fieldLines(head string, skip ...string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(head, "\r\n\r\n"), "\r\n")[1:] {
		name, _, _ := strings.Cut(l, ":")
		if !slices.Contains(skip, strings.ToLower(name)) {
			out = append(out, l)
		}
	}
	return out
}

// TestUpstreamHeadLikeNginx sends one request through nginx proxy_pass
// and through the engine to a raw upstream: the client's fields reach it
// in the same order, case and value from both, but for the documented
// differences (nginx sets Host first and its own Connection, drops
// Expect; the engine keeps Host in place and also drops the fields
// Connection names and Proxy-Authorization).
func TestUpstreamHeadLikeNginx(t *testing.T) {
	up := newHeadRecorder(t)
	ng := nginxtest.Start(t, `server { listen {{listen}};
		location / { proxy_pass http://`+up.addr+`; proxy_http_version 1.1;
			proxy_set_header Host $http_host; proxy_set_header Connection ""; } }`)
	addr := startProxy(t, &Server{Handler: &testProxy{pool: &Pool{}, addr: up.addr}})
	raw := "GET /p?q=1 HTTP/1.1\r\nuser-agent: t/1\r\nHost: a.test\r\nX-Mixed-Case: v1\r\n" +
		"accept: */*\r\nX-Mixed-Case: v2\r\nCookie: a=1\r\ncookie: b=2\r\nKeep-Alive: 5\r\nTE: trailers\r\n" +
		"Connection: keep-alive, X-Hop\r\nX-Hop: h\r\nProxy-Authorization: p\r\nx-empty:\r\n\r\n"
	roundTrip(t, ng.Addr, strings.Replace(raw, "keep-alive, ", "close, ", 1))
	fromNginx := <-up.heads
	roundTrip(t, addr, strings.Replace(raw, "keep-alive, ", "close, ", 1))
	fromEngine := <-up.heads
	skip := []string{"host", "connection", "x-hop", "proxy-authorization"}
	if a, b := fieldLines(fromNginx, skip...), fieldLines(fromEngine, skip...); !slices.Equal(a, b) {
		t.Fatalf("fields from nginx\n%q\nfrom the engine\n%q", a, b)
	}
	if !strings.HasPrefix(fromEngine, "GET /p?q=1 HTTP/1.1\r\nuser-agent: t/1\r\nHost: a.test\r\n") ||
		strings.Contains(fromEngine, "X-Hop") || strings.Contains(fromEngine, "Proxy-Authorization") {
		t.Fatalf("head from the engine %q", fromEngine)
	}
}
