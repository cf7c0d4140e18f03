package h1

import (
	"context"
	"net"
	"strings"
	"testing"

	"rlproxy/internal/testutil/memconn"
)

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
	up := &memconn.Conn{Reply: []byte(upstreamReply)}
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
	srv.ServeConn(&memconn.Conn{Msg: []byte(req), N: 4})
	client := &memconn.Conn{Msg: []byte(req), N: b.N}
	b.ReportAllocs()
	b.SetBytes(int64(len(req)))
	b.ResetTimer()
	srv.ServeConn(client)
	b.StopTimer()
	if !strings.HasPrefix(string(client.First), "HTTP/1.1 200 OK\r\n") || client.Written < b.N*len(upstreamReply) {
		b.Fatalf("wrote %d bytes for %d requests, first %q", client.Written, b.N, client.First)
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
