package h1

import (
	"bufio"
	"io"
	"net/http/httputil"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/memconn"
)

// TestAppendRequestKeepsOrderAndCase checks the upstream head: the
// client's fields in order and case, hop-by-hop fields and those named in
// Connection dropped, Set in place, Add at the end.
func TestAppendRequestKeepsOrderAndCase(t *testing.T) {
	raw := "GET /x?y=1 HTTP/1.1\r\nhost: a.test\r\nX-lower: 1\r\nConnection: keep-alive, X-Drop\r\n" +
		"X-Drop: 1\r\nKeep-Alive: 5\r\nTE: trailers\r\nx-real-ip: spoof\r\nUpgrade: h2c\r\n" +
		"HTTP2-Settings: AAA\r\nConnection: Upgrade\r\nX-Real-IP: again\r\nProxy-Authorization: x\r\nCookie: a=b\r\n\r\n"
	var r Request
	if _, why := ParseRequest([]byte(raw), &r, Limits{}); why != OK {
		t.Fatal(why)
	}
	e := Edits{
		Drop: []string{"cookie"},
		Set:  []FieldEdit{{"X-Real-IP", "192.0.2.1"}, {"X-Request-Id", "r1"}},
		Add:  []FieldEdit{{"X-Forwarded-For", "192.0.2.1"}},
	}
	got := string(AppendRequest(nil, &r, "/x?y=1", &e))
	want := "GET /x?y=1 HTTP/1.1\r\nhost: a.test\r\nX-lower: 1\r\nx-real-ip: 192.0.2.1\r\n" +
		"X-Request-Id: r1\r\nX-Forwarded-For: 192.0.2.1\r\n\r\n"
	if got != want {
		t.Fatalf("head\n%q\nwant\n%q", got, want)
	}
	if r.Upgrade() {
		t.Fatal("Upgrade: h2c alone read as an upgrade")
	}
}

// TestAppendRequestUpgrade keeps Upgrade when the handler allows it.
func TestAppendRequestUpgrade(t *testing.T) {
	raw := "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: k\r\n\r\n"
	var r Request
	if _, why := ParseRequest([]byte(raw), &r, Limits{}); why != OK || !r.Upgrade() {
		t.Fatal(why, r.Upgrade())
	}
	got := string(AppendRequest(nil, &r, r.Target(), &Edits{Upgrade: true}))
	want := "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nSec-WebSocket-Key: k\r\nConnection: upgrade\r\n\r\n"
	if got != want {
		t.Fatalf("head\n%q\nwant\n%q", got, want)
	}
}

// TestAppendResponse adds the quota fields after the upstream's, in its
// order and case, and drops its hop-by-hop fields.
func TestAppendResponse(t *testing.T) {
	raw := "HTTP/1.1 200 Fine\r\ncontent-type: text/plain\r\nKeep-Alive: timeout=5\r\n" +
		"Connection: keep-alive\r\nTransfer-Encoding: chunked\r\nx-b: 2\r\n\r\n"
	var p Response
	if _, why := ParseResponse([]byte(raw), &p, "GET", Limits{}); why != OK {
		t.Fatal(why)
	}
	e := Edits{Add: []FieldEdit{{"RateLimit", `"d";r=9;t=1`}, {"Retry-After", "1"}}}
	got := string(AppendResponse(nil, &p, &e, true, false))
	want := "HTTP/1.1 200 Fine\r\nConnection: close\r\ncontent-type: text/plain\r\n" +
		"Transfer-Encoding: chunked\r\nx-b: 2\r\nRateLimit: \"d\";r=9;t=1\r\nRetry-After: 1\r\n\r\n"
	if got != want {
		t.Fatalf("head\n%q\nwant\n%q", got, want)
	}
	if got := string(AppendResponse(nil, &p, &Edits{}, false, true)); got !=
		"HTTP/1.1 200 Fine\r\ncontent-type: text/plain\r\nx-b: 2\r\n\r\n" {
		t.Fatalf("dechunked head %q", got)
	}
}

// TestParseResponseFraming checks RFC 9112 §6.3 and the strict refusals.
func TestParseResponseFraming(t *testing.T) {
	cases := []struct {
		raw, method string
		framing     Framing
		length      int64
		why         Reason
	}{
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "GET", Length, 5, OK},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", "GET", Length, 5, OK},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", "GET", 0, 0, DupContentLength},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 05\r\n\r\n", "GET", 0, 0, DupContentLength},
		{"HTTP/1.0 100 \r\nContent-Length:05\r\nContent-Length: 5\r\n\r\n", "GET", 0, 0, DupContentLength},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", "GET", 0, 0, LengthAndChunked},
		{"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "GET", 0, 0, BadContentLength},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "GET", Chunked, 0, OK},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "GET", 0, 0, BadTransferEncoding},
		{"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "GET", 0, 0, ChunkedOnHTTP10},
		{"HTTP/1.1 200 OK\r\n\r\n", "GET", ToClose, 0, OK},
		{"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", "GET", NoBody, 5, OK},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "HEAD", NoBody, 5, OK},
		{"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", "GET", NoBody, 0, OK},
		{"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", "GET", Length, 0, OK},
		{"HTTP/1.1 20 OK\r\n\r\n", "GET", 0, 0, BadStatus},
		{"HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", "GET", 0, 0, BareLF},
		{"HTTP/1.1 200 OK\r\nX: a\x00\r\n\r\n", "GET", 0, 0, BadFieldValue},
	}
	var p Response
	for _, c := range cases {
		_, why := ParseResponse([]byte(c.raw), &p, c.method, Limits{})
		if why != c.why || why == OK && (p.Framing != c.framing || p.Length != c.length) {
			t.Errorf("%q: %v framing %d length %d, want %v %d %d", c.raw, why, p.Framing, p.Length, c.why, c.framing, c.length)
		}
	}
	big := "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-Pad: 0123456789012345678901234567890123456789\r\n", DefaultMaxHead/48)
	if _, why := ParseResponse([]byte(big+"\r\n"), &p, "GET", Limits{}); why != HeadTooLarge {
		t.Fatalf("a head over 1 MiB: %v", why)
	}
}

// TestConnectionCannotDropFraming: a Connection option naming
// Content-Length, Transfer-Encoding or Host leaves them in the head. The
// engine forwards the body as the sender framed it, so a head without its
// framing field would leave the body to be read as the next message.
func TestConnectionCannotDropFraming(t *testing.T) {
	cases := []struct{ raw, want string }{
		{"POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nConnection: Content-Length, host, X-Drop\r\nX-Drop: 1\r\n\r\n",
			"POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n"},
		{"POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close, transfer-encoding\r\n\r\n",
			"POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"},
	}
	for _, c := range cases {
		var r Request
		if _, why := ParseRequest([]byte(c.raw), &r, Limits{}); why != OK {
			t.Fatal(why)
		}
		if got := string(AppendRequest(nil, &r, r.Target(), &Edits{})); got != c.want {
			t.Errorf("head\n%q\nwant\n%q", got, c.want)
		}
	}
	var p Response
	raw := "HTTP/1.1 200 OK\r\nConnection: content-length\r\nContent-Length: 2\r\n\r\n"
	if _, why := ParseResponse([]byte(raw), &p, "GET", Limits{}); why != OK {
		t.Fatal(why)
	}
	if got := string(AppendResponse(nil, &p, &Edits{}, false, false)); got != "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n" {
		t.Errorf("response head %q", got)
	}
}

// TestTrailerDropsForbiddenFields: a chunked body's trailer is forwarded
// without the fields RFC 9110 §6.5.1 keeps out of trailers (Host,
// Content-Length, Transfer-Encoding, Authorization, ...), the others as
// sent.
func TestTrailerDropsForbiddenFields(t *testing.T) {
	raw := "0\r\nContent-Length: 50\r\nX-Sum: 7\r\nHost: evil\r\nTransfer-Encoding: chunked\r\nauthorization: x\r\nx-b: 2\r\n\r\n"
	var b Body
	b.reset(newReader(&memconn.Conn{Msg: []byte(raw), N: 1}, DefaultMaxHead, time.Now), Chunked, 0, DefaultMaxHead)
	if _, err := io.ReadAll(&b); err != nil {
		t.Fatal(err)
	}
	if got := string(appendTrailer(nil, b.Trailer())); got != "X-Sum: 7\r\nx-b: 2\r\n" {
		t.Fatalf("trailer %q", got)
	}
}

// TestChunkLineBound: a chunk-size line with extensions over maxChunkLine
// is refused also when it arrives in one read (the buffer had grown past
// the bound before the line's end was seen); one at the bound is read.
func TestChunkLineBound(t *testing.T) {
	for ext, want := range map[int]error{maxChunkLine - 2: nil, maxChunkLine - 1: BadChunk, 5000: BadChunk} {
		raw := "1;" + strings.Repeat("a", ext) + "\r\nx\r\n0\r\n\r\n" // the line is ext+2 bytes
		var b Body
		b.reset(newReader(&memconn.Conn{Msg: []byte(raw), N: 1}, DefaultMaxHead, time.Now), Chunked, 0, DefaultMaxHead)
		data, err := io.ReadAll(&b)
		if err != want || want == nil && string(data) != "x" {
			t.Errorf("a chunk line of %d bytes: %q, %v; want %v", ext+2, data, err, want)
		}
	}
}

// TestChunkSizeDigits: a chunk size has 1 to 16 hex digits, leading zeros
// counted (net/http's chunked reader refuses 17 zeros), and is below 2^63;
// whitespace after it may end the line but not precede a ";" (net/http
// refuses "0 ;a").
func TestChunkSizeDigits(t *testing.T) {
	for _, c := range []struct {
		line string
		n    int64
		ok   bool
	}{
		{"0", 0, true},
		{"0000000000000000", 0, true},
		{"0000000000000005;a=b", 5, true},
		{"7fffffffffffffff", 1<<63 - 1, true},
		{"00000000000000000", 0, false},
		{"00000000000000005", 0, false},
		{"8000000000000000", 0, false},
		{"ffffffffffffffff", 0, false},
		{"", 0, false},
		{";a", 0, false},
		{"a \t", 10, true},
		{"a; x = y ", 10, true},
		{"a ;x", 0, false},
		{"a\t;x", 0, false},
		{"0 ;0", 0, false},
	} {
		if n, ok := chunkSize([]byte(c.line)); n != c.n || ok != c.ok {
			t.Errorf("chunkSize(%q) = %d, %v; want %d, %v", c.line, n, ok, c.n, c.ok)
		}
	}
	var b Body
	b.reset(newReader(&memconn.Conn{Msg: []byte("00000000000000000\r\n\r\n"), N: 1}, DefaultMaxHead, time.Now), Chunked, 0, DefaultMaxHead)
	if data, err := io.ReadAll(&b); err != BadChunk || len(data) != 0 {
		t.Fatalf("17 zeros as the last chunk: %q, %v; want BadChunk", data, err)
	}
}

// TestChunkOverhead: chunk lines may carry 16 bytes plus twice their
// chunk's data, and 16 KiB more over the body, as in net/http; each
// "1;a...a" line of 4002 bytes adds 3986, so the fifth is refused, and
// the last chunk's line is not counted.
func TestChunkOverhead(t *testing.T) {
	long := "1;" + strings.Repeat("a", 4000) + "\r\nx\r\n"
	for _, c := range []struct {
		raw  string
		data string
		err  error
	}{
		{strings.Repeat(long, 4) + "0\r\n\r\n", "xxxx", nil},
		{strings.Repeat(long, 5) + "0\r\n\r\n", "xxxx", BadChunk},
		{strings.Repeat(long, 4) + "0;" + strings.Repeat("a", 4000) + "\r\n\r\n", "xxxx", nil},
		{strings.Repeat("2000\r\n"+strings.Repeat("y", 0x2000)+"\r\n", 3) + long + "0\r\n\r\n", strings.Repeat("y", 3*0x2000) + "x", nil},
	} {
		var b Body
		b.reset(newReader(&memconn.Conn{Msg: []byte(c.raw), N: 1}, DefaultMaxHead, time.Now), Chunked, 0, DefaultMaxHead)
		data, err := io.ReadAll(&b)
		if string(data) != c.data || err != c.err {
			t.Errorf("%.40q...: %d bytes, %v; want %d, %v", c.raw, len(data), err, len(c.data), c.err)
		}
		_, stdErr := io.ReadAll(httputil.NewChunkedReader(bufio.NewReader(strings.NewReader(c.raw))))
		if (stdErr == nil) != (c.err == nil) {
			t.Errorf("%.40q...: net/http %v", c.raw, stdErr)
		}
	}
}
