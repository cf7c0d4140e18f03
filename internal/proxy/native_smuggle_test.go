package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestNativeConnectionOptionKeepsFraming: a client's Connection option
// naming Content-Length or Transfer-Encoding does not remove the field
// from the upstream head. The engine forwards the body as the client
// framed it, so without the field the upstream read the body — here a
// request of its own — as the next request on the connection: a request
// rlproxy never routed nor charged (request smuggling).
func TestNativeConnectionOptionKeepsFraming(t *testing.T) {
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
	p := newNativeProxy(t, fmt.Sprintf("upstreams: { app: { url: %q } }\nroutes:\n  - { name: all, upstream: app }\n", up.URL))
	inner := "GET /smuggled HTTP/1.1\r\nHost: a.test\r\n\r\n"
	cases := []struct{ name, raw string }{
		{"content-length", fmt.Sprintf("POST /cl HTTP/1.1\r\nHost: a.test\r\nConnection: Content-Length\r\nContent-Length: %d\r\n\r\n%s", len(inner), inner)},
		{"chunked", fmt.Sprintf("POST /te HTTP/1.1\r\nHost: a.test\r\nConnection: transfer-encoding\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n",
			len(inner), inner)},
		{"host", "GET /host HTTP/1.1\r\nHost: a.test\r\nConnection: Host\r\n\r\n"},
	}
	for _, c := range cases {
		name := c.name
		rs := exchange(t, p.addr, c.raw, 1)
		got := up.last(t)
		want := inner
		if name == "host" {
			want = ""
		}
		if rs[0].StatusCode != 200 || got.body != want || got.host != "a.test" {
			t.Errorf("%s: %d; the upstream got %q with body %q, Host %q", name, rs[0].StatusCode, got.line, got.body, got.host)
		}
	}
	p.served(t)
}

// TestNativeTrailerWithoutForbiddenFields: a chunked upload's trailer
// reaches the upstream without the fields a trailer must not carry (RFC
// 9110 §6.5.1), which the std path does not forward either; an upstream
// that merges trailers into the head would take them as the request's.
func TestNativeTrailerWithoutForbiddenFields(t *testing.T) {
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
	p := newNativeProxy(t, fmt.Sprintf("upstreams: { app: { url: %q } }\nroutes:\n  - { name: all, upstream: app }\n", up.URL))
	raw := "POST /t HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n" +
		"0\r\nX-Sum: 7\r\nHost: evil.test\r\nContent-Length: 50\r\nAuthorization: Bearer other\r\n\r\n"
	rs := exchange(t, p.addr, raw, 1)
	got := up.last(t)
	if rs[0].StatusCode != 200 || got.body != "hello" || len(got.trail) != 1 || got.trail.Get("X-Sum") != "7" {
		t.Fatalf("%d; the upstream got body %q, trailer %v", rs[0].StatusCode, got.body, got.trail)
	}
	p.served(t)
}

// TestNativeEarlyAnswerIsTheResponse: an upstream that answers before
// reading a large upload (413 here) and closes cuts the engine's body
// write; its answer reaches the client (RFC 9112 §9.5), as on the std
// path, instead of a 502 counted against the server (with max_fails,
// a few such uploads took every server out of rotation).
func TestNativeEarlyAnswerIsTheResponse(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		_, _ = io.WriteString(w, "too big for me")
	}))
	t.Cleanup(up.Close)
	p := newNativeProxy(t, fmt.Sprintf("upstreams: { app: { url: %q } }\nroutes:\n  - { name: all, upstream: app }\n", up.URL))
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	const size = 32 << 20
	go func() {
		_, _ = fmt.Fprintf(c, "POST /up HTTP/1.1\r\nHost: a.test\r\nContent-Length: %d\r\n\r\n", size)
		_, _ = io.Copy(c, io.LimitReader(zeros{}, size)) // cut when the proxy closes
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusRequestEntityTooLarge || string(b) != "too big for me" {
		t.Fatalf("%d %q, want the upstream's 413", resp.StatusCode, b)
	}
	p.served(t)
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
