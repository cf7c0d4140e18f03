package h1

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestExchangePipelinedDuringHandler: the second request of a
// pipelined pair reaches the server's socket while the first's handler
// runs (after the reader's last read, before waitAfter arms its read). It
// is answered at once, not when IdleTimeout fires (the readiness of its
// arrival is gone by then: IdleProbe.Exchange reads once after the
// write).
func TestExchangePipelinedDuringHandler(t *testing.T) {
	started, second := make(chan struct{}), make(chan struct{})
	n := 0
	srv := &Server{IdleTimeout: 30 * time.Second, Handler: HandlerFunc(func(w *ResponseWriter, r *Request) {
		n++
		if n == 1 {
			close(started)
			<-second
			waitPending(t, w.c.nc) // the second request is in the socket, unread
		}
		body := "r" + strconv.Itoa(n)
		head := AppendField(AppendStatusLine(w.Scratch(), 200, "OK"), "Content-Length", strconv.Itoa(len(body)))
		w.WriteHead(append(head, "\r\n"...), Length, int64(len(body)))
		io.WriteString(w, body)
	})}
	c := serveAndDial(t, srv)
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-started // the server has read the first request
	if _, err := io.WriteString(c, "GET /2 HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	close(second)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	for i, want := range []string{"r1", "r2"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v after %v", i+1, err, time.Since(start))
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != want {
			t.Fatalf("response %d: %q, want %q", i+1, b, want)
		}
	}
}

// waitPending waits until c's socket holds bytes not yet read (FIONREAD),
// without reading them.
func waitPending(t *testing.T, c net.Conn) {
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Error(err)
		return
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); runtime.Gosched() {
		n := 0
		raw.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
		if n > 0 {
			return
		}
	}
	t.Error("no bytes pending")
}

// TestWatchClientAfterItsDeadline: the first request of a connection,
// whose upstream answers after the client's read_header_timeout has
// passed (but well within the upstream's response_header_timeout), gets
// the upstream's answer: the client is still there, waiting, and its
// socket's passed read deadline does not make Gone say otherwise.
func TestWatchClientAfterItsDeadline(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		c, err := up.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		time.Sleep(1500 * time.Millisecond) // a slow upstream: the answer after the client's 300 ms header timeout
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	}()
	pool := &Pool{HeaderTimeout: 10 * time.Second}
	got := make(chan error, 1)
	srv := &Server{ReadHeaderTimeout: 300 * time.Millisecond, IdleTimeout: 5 * time.Second,
		Handler: HandlerFunc(func(w *ResponseWriter, r *Request) {
			u, _, err := pool.Get(context.Background(), up.Addr().String())
			if err != nil {
				got <- err
				return
			}
			defer u.Discard()
			u.WriteHead([]byte("GET / HTTP/1.1\r\nHost: u\r\n\r\n"), NoBody)
			u.WatchClient(w)
			_, err = u.ReadResponse("GET")
			got <- err
			head := AppendField(AppendStatusLine(w.Scratch(), 200, "OK"), "Content-Length", "0")
			w.WriteHead(append(head, "\r\n"...), Length, 0)
		})}
	c := serveAndDial(t, srv)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if err := <-got; err != nil {
		t.Fatalf("ReadResponse: %v, want the upstream's 200 (the client is still connected)", err)
	}
}

// TestExchangeHalfCloseDuringHandler: a client that sends its request and
// half-closes (FIN) while the handler runs gets its response and then the
// server's close at once, not after idle_timeout.
func TestExchangeHalfCloseDuringHandler(t *testing.T) {
	started, fin := make(chan struct{}), make(chan struct{})
	srv := &Server{IdleTimeout: 30 * time.Second, Handler: HandlerFunc(func(w *ResponseWriter, r *Request) {
		close(started)
		<-fin
		for !peekEOF(w.c.nc) { // the FIN is in the socket, unread
			runtime.Gosched()
		}
		answerOK(w)
	})}
	c := serveAndDial(t, srv)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started
	c.(*net.TCPConn).CloseWrite()
	close(fin)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("after %q: %v after %v, want the server's close at once", b, err, time.Since(start))
	}
}

// peekEOF reports whether c's socket has its peer's FIN waiting, first in
// line (a peek that takes nothing).
func peekEOF(c net.Conn) bool {
	raw, _ := c.(syscall.Conn).SyscallConn()
	eof := false
	raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		eof = err == nil && n == 0
	})
	return eof
}

// TestSlowlorisLaterHead: after a first exchange, a client trickling
// its second head a byte at a time is cut at read_header_timeout (0.5 s
// here, well before idle_timeout 30 s).
func TestSlowlorisLaterHead(t *testing.T) {
	srv := &Server{IdleTimeout: 30 * time.Second, ReadHeaderTimeout: 500 * time.Millisecond, Handler: HandlerFunc(func(w *ResponseWriter, r *Request) {
		answerOK(w)
	})}
	c := serveAndDial(t, srv)
	br := bufio.NewReader(c)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(br, nil); err != nil {
		t.Fatal(err)
	} else {
		io.ReadAll(resp.Body)
	}
	start := time.Now()
	fin := make(chan time.Duration, 1)
	go func() { io.Copy(io.Discard, br); fin <- time.Since(start) }() // the server's FIN
	head := "GET /2 HTTP/1.1\r\nHost: x\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n"
	for i := 0; i < len(head); i++ {
		select {
		case d := <-fin:
			if d > 3*time.Second {
				t.Fatalf("cut after %v, want about read_header_timeout (500 ms)", d)
			}
			return
		case <-time.After(50 * time.Millisecond): // the slowloris' pace
		}
		c.Write([]byte{head[i]})
	}
	t.Fatalf("the whole head trickled over %v and the server never cut it", time.Since(start))
}

// answerOK answers 200 with the body "ok".
func answerOK(w *ResponseWriter) {
	head := AppendField(AppendStatusLine(w.Scratch(), 200, "OK"), "Content-Length", "2")
	w.WriteHead(append(head, "\r\n"...), Length, 2)
	io.WriteString(w, "ok")
}

// serveAndDial serves srv on a new loopback listener and returns a client
// connection to it, closed when the test ends.
func serveAndDial(t *testing.T, srv *Server) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	startServing(t, ln, srv)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
