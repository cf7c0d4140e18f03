package h1

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// TestIdleMemoryAfterLargeHead: a connection whose one request had a
// large head (many small fields, just under server.max_header_bytes)
// gives that memory back once idle, as nginx frees its large header
// buffers at keep-alive: otherwise one large head per connection pins
// megabytes on each of thousands of idle connections.
func TestIdleMemoryAfterLargeHead(t *testing.T) {
	const conns = 50
	addr := startProxy(t, &Server{Handler: HandlerFunc(func(w *ResponseWriter, r *Request) {
		w.WriteHead([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"), Length, 2)
		io.WriteString(w, "ok")
	})})
	head := "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("a:\r\n", 200_000) + "\r\n" // 800 kB, 200,000 fields
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	clients := make([]net.Conn, 0, conns)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		io.WriteString(c, head)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		// The server is idle on the connection once the answer is read
		// and it waits for the next head; a small request proves it.
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		if resp, err = http.ReadResponse(bufio.NewReader(c), nil); err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := (int64(after.HeapInuse) - int64(before.HeapInuse)) / conns
	t.Logf("per idle connection after a large head: heap %d B", heap)
	if heap > 64<<10 {
		t.Fatalf("%d B per idle connection after one large head, want at most 64 KiB", heap)
	}
}
