package h1

import (
	"bufio"
	"bytes"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// stricter lists the reasons this parser may refuse a head net/http's
// server accepts; docs/ENGINE.md explains each, and TestStricterCases
// holds one example of each.
var stricter = map[Reason]bool{
	BadTarget:        true, // "#", opaque or authority forms off CONNECT, "*" off OPTIONS
	BadVersion:       true, // HTTP/1.2 to HTTP/1.9
	ObsFold:          true,
	BareLF:           true,
	DupContentLength: true, // identical duplicates; net/http keeps one
	LengthAndChunked: true, // net/http drops the Content-Length
	ChunkedOnHTTP10:  true, // net/http ignores Transfer-Encoding in HTTP/1.0
	LineTooLong:      true,
}

// stdRead reads b as net/http's server reads a request head: ReadRequest
// plus the server's own checks (conn.readRequest: version, Host, field
// names and values).
func stdRead(b []byte) (*http.Request, error) {
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b)))
	if err != nil {
		return nil, err
	}
	// ReadRequest deletes the Host fields the server checks: read them
	// again as readRequest does.
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(b)))
	tp.ReadLine()
	mh, _ := tp.ReadMIMEHeader()
	hosts, haveHost := mh["Host"]
	switch {
	case req.ProtoMajor != 1:
		return nil, errStd("version")
	case req.ProtoAtLeast(1, 1) && !haveHost && req.Method != "CONNECT":
		return nil, errStd("missing host")
	case len(hosts) == 1 && !httpguts.ValidHostHeader(hosts[0]):
		return nil, errStd("bad host")
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, errStd("name")
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil, errStd("value")
			}
		}
	}
	return req, nil
}

type errStd string

func (e errStd) Error() string { return string(e) }

// FuzzRequestHead compares ParseRequest with net/http's reading of the
// same bytes: the same verdict, method, target, fields and body framing,
// or a refusal whose reason is listed in stricter.
func FuzzRequestHead(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	var r Request
	f.Fuzz(func(t *testing.T, b []byte) {
		n, why := ParseRequest(b, &r, Limits{})
		std, err := stdRead(b)
		switch {
		case n == 0 && why == OK:
			if err == nil {
				t.Fatalf("incomplete here, net/http read %q %q", std.Method, std.RequestURI)
			}
		case why != OK:
			if err == nil && !stricter[why] {
				t.Fatalf("refused (%v), net/http accepts: %q", why, b)
			}
		case err != nil:
			t.Fatalf("accepted, net/http refuses (%v): %q", err, b)
		default:
			compare(t, &r, std)
		}
	})
}

// compare checks that r reads what std reads.
func compare(t *testing.T, r *Request, std *http.Request) {
	t.Helper()
	if h, ok := r.Get("Host"); ok != (r.host >= 0) || h != r.Host() {
		t.Fatalf("Host %q, Get %q", r.Host(), h)
	}
	if r.Method() != std.Method || r.Target() != std.RequestURI || r.Proto() != std.Proto {
		t.Fatalf("line %q %q %q, net/http %q %q %q", r.Method(), r.Target(), r.Proto(), std.Method, std.RequestURI, std.Proto)
	}
	got := http.Header{}
	r.Each(func(name, value string) bool {
		got[textproto.CanonicalMIMEHeaderKey(name)] = append(got[textproto.CanonicalMIMEHeaderKey(name)], value)
		return true
	})
	for _, k := range []string{"Host", "Content-Length", "Transfer-Encoding", "Cache-Control"} {
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
	switch r.Framing {
	case Chunked:
		if !slices.Equal(std.TransferEncoding, []string{"chunked"}) {
			t.Fatalf("chunked, net/http %q", std.TransferEncoding)
		}
	case Length, NoBody:
		if std.ContentLength != r.Length || len(std.TransferEncoding) > 0 {
			t.Fatalf("length %d, net/http %d %q", r.Length, std.ContentLength, std.TransferEncoding)
		}
	}
	if r.Close() != std.Close {
		t.Fatalf("close %v, net/http %v", r.Close(), std.Close)
	}
}

var seeds = []string{
	"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /a?b=c HTTP/1.0\r\n\r\n",
	"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
	"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
	"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n",
	"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1,1\r\n\r\n",
	"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
	"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
	"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n",
	"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n",
	"POST /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
	"GET / HTTP/1.1\nHost: a\n\n",
	"GET / HTTP/1.1\r\nHost: a\rX: y\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n",
	"GET http://a.test/x HTTP/1.1\r\nHost: b\r\n\r\n",
	"CONNECT a.test:443 HTTP/1.1\r\n\r\n",
	"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nConnection: close, Upgrade\r\nUpgrade: websocket\r\n\r\n",
	"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
	"GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /a?b=%zz&c=%4 HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET http://[::1]:80/ HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
}

// TestStricterCases holds an example of each listed case where this
// parser refuses what net/http's server accepts (docs/ENGINE.md).
func TestStricterCases(t *testing.T) {
	cases := []struct {
		raw string
		why Reason
	}{
		{"GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget},
		{"GET x:admin HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget},
		{"GET a.test:80 HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget},
		{"GET * HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget},
		{"GET http://u@a.test/ HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget},
		{"CONNECT /rpc HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget},
		{"GET / HTTP/1.2\r\nHost: a\r\n\r\n", BadVersion},
		{"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", ObsFold},
		{"GET / HTTP/1.1\nHost: a\n\n", BareLF},
		{"GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n", BareLF},
		{"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", DupContentLength},
		{"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", LengthAndChunked},
		{"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", ChunkedOnHTTP10},
		{"GET /" + strings.Repeat("a", DefaultMaxLine) + " HTTP/1.1\r\nHost: a\r\n\r\n", LineTooLong},
	}
	var r Request
	for _, c := range cases {
		if _, err := stdRead([]byte(c.raw)); err != nil {
			t.Errorf("net/http refuses %.60q (%v): not a stricter case", c.raw, err)
		}
		if _, why := ParseRequest([]byte(c.raw), &r, Limits{}); why != c.why {
			t.Errorf("%.60q: %v, want %v", c.raw, why, c.why)
		}
		if !stricter[c.why] {
			t.Errorf("%v is not listed", c.why)
		}
	}
}
