package proxy

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"rlproxy/internal/h1"
	"rlproxy/internal/testutil/memconn"
	"rlproxy/internal/testutil/netutil"
)

// The engine's path in process: ServeH1 driven by h1.Server.ServeConn
// over in-memory connections (memconn.Conn), to an in-memory upstream through
// the route's h1.Pool — routing, the real-IP resolver, the admission
// (memory store), the upstream head with the proxy's edits, the response
// head with the quota fields, the metrics. Nothing else allocates, so
// allocs/op is the path's own.

// memPeer is the client's address on every in-memory connection.
var memPeer = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 7), Port: 40000}

// get10 is a browser-like GET with 10 header fields.
const get10 = "GET /api/v1/items?page=2 HTTP/1.1\r\nHost: api.example.test\r\n" +
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/128.0\r\n" +
	"Accept: application/json\r\nAccept-Language: en-GB,en;q=0.5\r\n" +
	"Accept-Encoding: gzip, deflate, br\r\nAuthorization: Bearer abcdef0123456789\r\n" +
	"X-Forwarded-For: 192.0.2.1\r\nConnection: keep-alive\r\n" +
	"Cookie: session=0123456789abcdef\r\nCache-Control: no-cache\r\n\r\n"

// memReply is the upstream's answer to every request.
const memReply = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" +
	"Date: Wed, 02 Dec 2026 02:00:00 GMT\r\nContent-Length: 13\r\n\r\n{\"items\":[]}\n"

// benchNative serves b.N copies of req through ServeH1 with the routes
// and policies of tail, each answered 200.
func benchNative(b *testing.B, tail, req string) {
	benchNativeStatus(b, tail, req, "200 OK", len(memReply))
}

// benchNativeStatus is benchNative for answers with status, each at
// least size bytes long.
func benchNativeStatus(b *testing.B, tail, req, status string, size int) {
	p := newNativeProxy(b, "upstreams: { app: { url: \"http://upstream.test\" } }\n"+tail)
	up := &memconn.Conn{Reply: []byte(memReply), Peer: memPeer}
	p.s.Runtime().h1Pools["app"].Dial = func(context.Context, string, string) (net.Conn, error) { return up, nil }
	srv := &h1.Server{Handler: p.s}
	// Warm up: pools, buffers and the upstream connection exist before
	// the measured requests.
	warm := &memconn.Conn{Msg: []byte(req), N: 4, Peer: memPeer}
	srv.ServeConn(warm)
	if !strings.HasPrefix(string(warm.First), "HTTP/1.1 200 OK\r\n") {
		b.Fatalf("warm-up answer %q", warm.First)
	}
	client := &memconn.Conn{Msg: []byte(req), N: b.N, Peer: memPeer}
	b.ReportAllocs()
	b.ResetTimer()
	srv.ServeConn(client)
	b.StopTimer()
	if client.Written < b.N*size || !strings.HasPrefix(string(client.First), "HTTP/1.1 "+status+"\r\n") {
		b.Fatalf("wrote %d bytes for %d requests, first %q", client.Written, b.N, client.First)
	}
}

const benchMemoryPolicy = `
store: { type: memory }
policies:
  bench: { algorithm: token_bucket, rate: 1000000r/s, burst: 1000000, key: ip }
routes:
  - { name: all, match: { path_prefix: / }, upstream: app, policies: [bench] }
`

// BenchmarkNative: a GET with 10 fields and a POST with a 1 KiB body,
// on a route without policies (none) and with a token bucket in memory.
func BenchmarkNative(b *testing.B) {
	post := "POST /api/v1/items HTTP/1.1\r\nHost: api.example.test\r\n" +
		"Content-Type: application/octet-stream\r\nContent-Length: 1024\r\n\r\n" + strings.Repeat("x", 1024)
	for _, policy := range []struct{ name, tail string }{
		{"none", "routes:\n  - { name: all, match: { path_prefix: / }, upstream: app }\n"},
		{"memory", benchMemoryPolicy},
	} {
		for _, req := range []struct{ name, raw string }{{"get10", get10}, {"post1k", post}} {
			b.Run(fmt.Sprintf("%s/%s", req.name, policy.name), func(b *testing.B) { benchNative(b, policy.tail, req.raw) })
		}
	}
}

// msgReader reads HTTP/1.1 messages framed by Content-Length (or none)
// from a connection without allocating: the loopback benchmark's client
// and upstream.
type msgReader struct {
	c    net.Conn
	buf  []byte
	r, w int
}

// next reads one message and returns its head (valid until the next call).
func (m *msgReader) next() ([]byte, error) {
	for {
		if i := bytes.Index(m.buf[m.r:m.w], []byte("\r\n\r\n")); i >= 0 {
			head := m.buf[m.r : m.r+i+4]
			n := contentLength(head)
			for m.w-m.r < len(head)+n {
				if err := m.fill(); err != nil {
					return nil, err
				}
				head = m.buf[m.r : m.r+i+4]
			}
			m.r += len(head) + n
			return head, nil
		}
		if err := m.fill(); err != nil {
			return nil, err
		}
	}
}

func (m *msgReader) fill() error {
	if m.r > 0 {
		m.w = copy(m.buf, m.buf[m.r:m.w])
		m.r = 0
	}
	k, err := m.c.Read(m.buf[m.w:])
	m.w += k
	return err
}

// contentLength is the head's Content-Length (any case), 0 for none.
func contentLength(head []byte) int {
	for _, name := range [...]string{"\r\nContent-Length: ", "\r\ncontent-length: "} {
		if j := bytes.Index(head, []byte(name)); j >= 0 {
			n := 0
			for _, c := range head[j+len(name):] {
				if c < '0' || c > '9' {
					break
				}
				n = n*10 + int(c-'0')
			}
			return n
		}
	}
	return 0
}

// loopUpstream answers memReply to every request over loopback.
func loopUpstream(b *testing.B) string {
	return netutil.ServeConns(b, func(c net.Conn) {
		m := &msgReader{c: c, buf: make([]byte, 64<<10)}
		reply := []byte(memReply)
		for {
			if _, err := m.next(); err != nil {
				return
			}
			if _, err := c.Write(reply); err != nil {
				return
			}
		}
	})
}

// BenchmarkEngines is one keep-alive client over loopback through the
// engine's path (auto: h1.Server and ServeH1) and through net/http's
// (std: ServeHTTP), to a loopback upstream: the same requests, policies
// and upstream, the whole process's allocations counted.
func BenchmarkEngines(b *testing.B) {
	post := "POST /api/v1/items HTTP/1.1\r\nHost: api.example.test\r\n" +
		"Content-Type: application/octet-stream\r\nContent-Length: 1024\r\n\r\n" + strings.Repeat("x", 1024)
	for _, policy := range []struct{ name, tail string }{
		{"none", "routes:\n  - { name: all, match: { path_prefix: / }, upstream: app }\n"},
		{"memory", benchMemoryPolicy},
	} {
		for _, req := range []struct{ name, raw string }{{"get10", get10}, {"post1k", post}} {
			for _, engine := range []string{"auto", "std"} {
				b.Run(req.name+"/"+policy.name+"/"+engine, func(b *testing.B) {
					p := newNativeProxy(b, fmt.Sprintf("upstreams: { app: { url: \"http://%s\" } }\n", loopUpstream(b))+policy.tail)
					addr := p.addr
					if engine == "std" {
						addr = p.std
					}
					c, err := net.Dial("tcp", addr)
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					m := &msgReader{c: c, buf: make([]byte, 64<<10)}
					raw := []byte(req.raw)
					do := func() {
						if _, err := c.Write(raw); err != nil {
							b.Fatal(err)
						}
						head, err := m.next()
						if err != nil || !bytes.HasPrefix(head, []byte("HTTP/1.1 200 ")) {
							b.Fatalf("%v %q", err, head)
						}
					}
					for range 10 {
						do()
					}
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						do()
					}
				})
			}
		}
	}
}

// BenchmarkNativeRefusal is the refusal path on the engine: a 429
// problem+json with quota headers and Retry-After, written by the std
// path's writeProblem through answerWriter.
func BenchmarkNativeRefusal(b *testing.B) {
	benchNativeStatus(b, `
store: { type: memory }
policies:
  tight: { algorithm: fixed_window, limit: 1, window: 1h, key: ip }
routes:
  - { name: all, match: { path_prefix: / }, upstream: app, policies: [tight] }
`, get10, "429 Too Many Requests", 300)
}
