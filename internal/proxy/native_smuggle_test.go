package proxy

import (
	"fmt"
	"io"
	"net/http"
	"testing"
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
