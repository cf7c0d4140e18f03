package h1

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// memConn is an in-memory net.Conn for benchmarks: Read serves msg n
// times, then io.EOF; Write is counted and dropped, or, with reply set,
// makes the next Read serve reply (an upstream answering each request).
type memConn struct {
	msg, reply []byte
	n          int
	pending    []byte
	written    int
	first      []byte // the first write, kept for checks
}

func (c *memConn) Read(p []byte) (int, error) {
	if len(c.pending) == 0 {
		if c.reply != nil || c.n == 0 {
			return 0, io.EOF
		}
		c.n--
		c.pending = c.msg
	}
	k := copy(p, c.pending)
	c.pending = c.pending[k:]
	return k, nil
}

func (c *memConn) Write(p []byte) (int, error) {
	c.written += len(p)
	if c.first == nil {
		c.first = append([]byte(nil), p...)
	}
	if c.reply != nil && len(c.pending) == 0 && bytes.HasSuffix(p, []byte("\r\n\r\n")) {
		c.pending = c.reply
	}
	return len(p), nil
}

func (c *memConn) Close() error                     { return nil }
func (c *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

// get10 is a browser-like GET with 10 header fields.
const get10 = "GET /api/v1/items?page=2 HTTP/1.1\r\nHost: api.example.test\r\n" +
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/128.0\r\n" +
	"Accept: application/json\r\nAccept-Language: en-GB,en;q=0.5\r\n" +
	"Accept-Encoding: gzip, deflate, br\r\nAuthorization: Bearer abcdef0123456789\r\n" +
	"X-Forwarded-For: 192.0.2.1\r\nConnection: keep-alive\r\n" +
	"Cookie: session=0123456789abcdef\r\nCache-Control: no-cache\r\n\r\n"

// upstreamReply is the backend's answer to every request.
const upstreamReply = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" +
	"Date: Wed, 02 Dec 2026 02:00:00 GMT\r\nContent-Length: 13\r\n\r\n{\"items\":[]}\n"

// benchProxy serves b.N copies of req through Server and testProxy over
// in-memory connections: the request head parsed, the upstream head
// written with edits, the body streamed, the upstream's response head
// parsed and written back with quota fields, the body copied.
func benchProxy(b *testing.B, req string) {
	up := &memConn{reply: []byte(upstreamReply)}
	p := &testProxy{
		pool: &Pool{Dial: func(context.Context, string, string) (net.Conn, error) { return up, nil }},
		addr: "upstream:80",
		edits: Edits{
			Set: []FieldEdit{{"X-Real-IP", "192.0.2.1"}, {"X-Request-Id", "0123456789abcdef"}},
			Add: []FieldEdit{{"X-Forwarded-Proto", "http"}},
		},
		back: Edits{Add: []FieldEdit{{"RateLimit-Policy", `"default";q=100;w=60`}, {"RateLimit", `"default";r=99;t=60`}}},
	}
	srv := &Server{Handler: p}
	// Warm up: buffers, the pooled copy buffer and the upstream
	// connection exist before the measured requests.
	srv.ServeConn(&memConn{msg: []byte(req), n: 4})
	client := &memConn{msg: []byte(req), n: b.N}
	b.ReportAllocs()
	b.SetBytes(int64(len(req)))
	b.ResetTimer()
	srv.ServeConn(client)
	b.StopTimer()
	if !strings.HasPrefix(string(client.first), "HTTP/1.1 200 OK\r\n") || client.written < b.N*len(upstreamReply) {
		b.Fatalf("wrote %d bytes for %d requests, first %q", client.written, b.N, client.first)
	}
}

// BenchmarkGet10 is a GET with 10 fields through the engine.
func BenchmarkGet10(b *testing.B) { benchProxy(b, get10) }

// BenchmarkPost1K is a POST with a 1 KiB body through the engine.
func BenchmarkPost1K(b *testing.B) {
	body := strings.Repeat("x", 1024)
	benchProxy(b, "POST /api/v1/items HTTP/1.1\r\nHost: api.example.test\r\n"+
		"Content-Type: application/octet-stream\r\nContent-Length: 1024\r\n\r\n"+body)
}

// BenchmarkParseRequest is the request-head parser alone.
func BenchmarkParseRequest(b *testing.B) {
	buf := []byte(get10)
	var r Request
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if _, why := ParseRequest(buf, &r, Limits{}); why != OK {
			b.Fatal(why)
		}
	}
}
