package h1

import (
	"bufio"
	"bytes"
	"net/http"
	"net/textproto"
	"slices"
	"testing"
)

// FuzzResponseHead compares ParseResponse with net/http's ReadResponse
// on the same bytes: whatever this parser accepts net/http reads with the
// same status, fields and body framing; it may refuse more.
func FuzzResponseHead(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nbody",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\nConnection: close\r\n\r\n",
	} {
		f.Add([]byte(s), false)
	}
	var p Response
	f.Fuzz(func(t *testing.T, b []byte, head bool) {
		method := "GET"
		if head {
			method = "HEAD"
		}
		n, why := ParseResponse(b, &p, method, Limits{})
		if n == 0 || why != OK {
			return
		}
		std, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), &http.Request{Method: method})
		if err != nil {
			t.Fatalf("accepted %q, net/http refuses: %v", b, err)
		}
		compareResponse(t, &p, std)
	})
}

func compareResponse(t *testing.T, p *Response, std *http.Response) {
	t.Helper()
	if p.Status != std.StatusCode || p.Close != std.Close {
		t.Fatalf("status %d close %v, net/http %d %v", p.Status, p.Close, std.StatusCode, std.Close)
	}
	got := http.Header{}
	p.Each(func(name, value string) bool {
		k := textproto.CanonicalMIMEHeaderKey(name)
		got[k] = append(got[k], value)
		return true
	})
	// net/http drops Connection: close (Close holds it), moves the
	// framing fields and may add Cache-Control.
	for _, k := range []string{"Connection", "Content-Length", "Transfer-Encoding", "Cache-Control"} {
		delete(got, k)
		delete(std.Header, k)
	}
	for k, vv := range std.Header {
		if !slices.Equal(got[k], vv) {
			t.Fatalf("field %s: %q, net/http %q", k, got[k], vv)
		}
	}
	if len(got) != len(std.Header) {
		t.Fatalf("fields %q, net/http %q", got, std.Header)
	}
	switch p.Framing {
	case Chunked:
		if !slices.Equal(std.TransferEncoding, []string{"chunked"}) {
			t.Fatalf("chunked, net/http %q", std.TransferEncoding)
		}
	case Length:
		if std.ContentLength != p.Length {
			t.Fatalf("length %d, net/http %d", p.Length, std.ContentLength)
		}
	case ToClose:
		if std.ContentLength != -1 || len(std.TransferEncoding) > 0 {
			t.Fatalf("to the close, net/http %d %q", std.ContentLength, std.TransferEncoding)
		}
	}
}
