package h1

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestShutdownDrains: an idle connection is closed at once, a request in
// flight completes with "Connection: close", a hijacked tunnel keeps
// Shutdown waiting until it ends.
func TestShutdownDrains(t *testing.T) {
	inFlight, release := make(chan struct{}), make(chan struct{})
	tunnelUp := make(chan net.Conn, 1)
	srv := &Server{Handler: drainHandler(inFlight, release, tunnelUp)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	startServing(t, ln, srv)
	addr := ln.Addr().String()

	idle, idleR := dialProxy(t, addr)
	io.WriteString(idle, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp, err := http.ReadResponse(idleR, nil); err != nil || resp.StatusCode != 204 {
		t.Fatal(resp, err)
	}
	busy, busyR := dialProxy(t, addr)
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	<-inFlight
	tc, tcR := dialProxy(t, addr)
	io.WriteString(tc, "GET /tunnel HTTP/1.1\r\nHost: a\r\n\r\n")
	tunnel := <-tunnelUp
	http.ReadResponse(tcR, nil)

	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(context.Background()) }()
	if _, err := idleR.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection after shutdown: %v", err)
	}
	close(release)
	resp, err := http.ReadResponse(busyR, nil)
	if err != nil || !resp.Close {
		t.Fatalf("in-flight answer %v %v, want Connection: close", resp, err)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with a tunnel open", err)
	case <-time.After(50 * time.Millisecond):
	}
	tunnel.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// drainHandler answers /slow once release is closed, switches /tunnel to
// a tunnel (sent on tunnelUp), and answers anything else at once.
func drainHandler(inFlight, release chan struct{}, tunnelUp chan net.Conn) Handler {
	return HandlerFunc(func(w *ResponseWriter, r *Request) {
		switch r.Target() {
		case "/slow":
			close(inFlight)
			<-release
			head := []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n")
			if w.Closing() {
				head = append(head, "Connection: close\r\n"...)
			}
			w.WriteHead(append(head, "\r\n"...), NoBody, 0)
		case "/tunnel":
			w.WriteHead([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n"), NoBody, 0)
			c, _, _ := w.Hijack()
			tunnelUp <- c
		default:
			w.WriteHead([]byte("HTTP/1.1 204 No Content\r\n\r\n"), NoBody, 0)
		}
	})
}

// TestShutdownDeadlineClosesTunnels: when the context ends first, the
// remaining tunnels are closed and Shutdown returns its error.
func TestShutdownDeadlineClosesTunnels(t *testing.T) {
	up := make(chan struct{})
	h := HandlerFunc(func(w *ResponseWriter, r *Request) {
		w.WriteHead([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n"), NoBody, 0)
		w.Hijack()
		close(up)
	})
	srv := &Server{Handler: h}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	startServing(t, ln, srv)
	c, br := dialProxy(t, ln.Addr().String())
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	<-up
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown: %v", err)
	}
	rest, _ := io.ReadAll(br)
	if !strings.HasPrefix(string(rest), "HTTP/1.1 101") {
		t.Fatalf("tunnel got %q, want the 101 then the close", rest)
	}
}

// TestPoolIdleProbe: a connection on which the upstream sent a byte past
// its response, or which it closed, is not reused; a silent one is.
func TestPoolIdleProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 4096)
				for {
					k, err := c.Read(buf)
					if err != nil {
						c.Close()
						return
					}
					reply := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
					if strings.Contains(string(buf[:k]), "/stray") {
						reply += "HTTP/1.1 200 OK\r\n"
					}
					io.WriteString(c, reply)
				}
			}()
		}
	}()
	p := &Pool{}
	exchange := func(target string) bool {
		u, reused, err := p.Get(context.Background(), ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		bw, _ := u.WriteHead([]byte("GET "+target+" HTTP/1.1\r\nHost: u\r\n\r\n"), NoBody)
		_ = bw
		resp, err := u.ReadResponse("GET")
		if err != nil || resp.Status != 200 {
			t.Fatal(resp, err)
		}
		io.Copy(io.Discard, u.Body())
		u.Release(nil)
		return reused
	}
	if exchange("/a") || !exchange("/b") {
		t.Fatal("a silent connection was not reused")
	}
	exchange("/stray")
	if exchange("/c") {
		t.Fatal("a connection with stray bytes was reused")
	}
}

// TestPoolReadTimeout: an upstream that stalls in the middle of a body is
// cut after ReadTimeout without a byte, and the connection not reused.
func TestPoolReadTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stall := make(chan struct{})
	defer close(stall)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Read(make([]byte, 4096))
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
		<-stall
	}()
	const d = 200 * time.Millisecond
	p := &Pool{ReadTimeout: d}
	u, _, err := p.Get(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	u.WriteHead([]byte("GET / HTTP/1.1\r\nHost: u\r\n\r\n"), NoBody)
	if _, err := u.ReadResponse("GET"); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(u.Body())
	if string(got) != "abc" || !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) < d {
		t.Fatalf("read %q, %v after %v", got, err, time.Since(start))
	}
	u.Release(err)
	if len(p.idle[ln.Addr().String()]) != 0 {
		t.Fatal("a cut connection went back to the pool")
	}
}

// TestPoolHeaderTimeout: an upstream that never answers is cut after
// HeaderTimeout, though ReadTimeout is longer.
func TestPoolHeaderTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	const d = 200 * time.Millisecond
	p := &Pool{HeaderTimeout: d, ReadTimeout: time.Hour}
	u, _, err := p.Get(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	u.WriteHead([]byte("GET / HTTP/1.1\r\nHost: u\r\n\r\n"), NoBody)
	if _, err := u.ReadResponse("GET"); !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) < d {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
	u.Release(err)
}
