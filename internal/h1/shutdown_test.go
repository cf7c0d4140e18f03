package h1

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
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
