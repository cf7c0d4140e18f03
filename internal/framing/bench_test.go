package framing_test

import (
	"math"
	"net"
	"strings"
	"testing"

	"rlproxy/internal/framing"
	"rlproxy/internal/testutil/memconn"
)

// BenchmarkGuard is the guard's cost per request: a wrk-like GET head
// (and, for /post, a 1 KiB Content-Length body) read through a Conn in
// net/http's 4 KiB reads, compared with the bare stream (/none).
func BenchmarkGuard(b *testing.B) {
	get := "GET /api/items?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: wrk\r\nAccept: */*\r\nX-Api-Key: k\r\n\r\n"
	post := "POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 1024\r\n\r\n" + strings.Repeat("x", 1024)
	for _, tc := range []struct {
		name, req string
		guard     bool
	}{{"none", get, false}, {"get", get, true}, {"post", post, true}} {
		b.Run(tc.name, func(b *testing.B) {
			stream := strings.Repeat(tc.req, 64)
			var c net.Conn = &memconn.Conn{Msg: []byte(stream), N: math.MaxInt}
			if tc.guard {
				c = framing.Wrap(c, nil)
			}
			buf := make([]byte, 4096)
			b.SetBytes(int64(len(tc.req)))
			b.ReportAllocs()
			b.ResetTimer()
			got := 0
			for got < b.N*len(tc.req) {
				n, _ := c.Read(buf)
				got += n
			}
		})
	}
}
