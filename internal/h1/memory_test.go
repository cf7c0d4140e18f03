package h1

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
)

// TestIdleConnectionMemory keeps many keep-alive connections idle after
// one request each and bounds the memory each holds (heap and goroutine
// stack): what 10,000 idle clients cost.
func TestIdleConnectionMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 2,000 connections")
	}
	const conns = 2000
	addr := startProxy(t, &Server{Handler: HandlerFunc(func(w *ResponseWriter, r *Request) {
		w.WriteHead([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"), Length, 2)
		io.WriteString(w, "ok")
	})})
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
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	// The clients' own sockets and readers are counted too: an upper
	// bound on the server side.
	heap := (int64(after.HeapInuse) - int64(before.HeapInuse)) / conns
	stack := (int64(after.StackInuse) - int64(before.StackInuse)) / conns
	t.Logf("per idle connection: heap %d B, stack %d B", heap, stack)
	if heap+stack > 32<<10 {
		t.Fatalf("%d B per idle connection, want at most 32 KiB", heap+stack)
	}
}
