package h1

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// dialProxy opens a client connection with a 10 s deadline.
func dialProxy(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

// TestPipelinedInOrder sends three requests in one write; the answers
// come back in order on the one connection.
func TestPipelinedInOrder(t *testing.T) {
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(20 * time.Millisecond) // the first answer is not the first ready
		}
		io.WriteString(w, r.URL.Path)
	})
	addr := startProxy(t, &Server{Handler: &testProxy{pool: &Pool{}, addr: hostOf(b.Server)}})
	c, br := dialProxy(t, addr)
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\nPOST /two HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET /three HTTP/1.1\r\nHost: a\r\n\r\n")
	for _, want := range []string{"/slow", "/two", "/three"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		if string(got) != want {
			t.Fatalf("answer %q, want %q", got, want)
		}
	}
}

// TestHTTP10KeepAlive: an HTTP/1.0 client that asks to keep the
// connection is told so, and its next request is served on it.
func TestHTTP10KeepAlive(t *testing.T) {
	addr := startProxy(t, &Server{Handler: h1Answer})
	c, br := dialProxy(t, addr)
	for range 2 {
		io.WriteString(c, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.Header.Get("Connection") != "keep-alive" {
			t.Fatal(resp, err)
		}
		io.Copy(io.Discard, resp.Body)
	}
}

// TestChunkedBodyAndTrailers passes a chunked request body with a
// trailer to the backend, and a response trailer back.
func TestChunkedBodyAndTrailers(t *testing.T) {
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Trailer", "X-Cost")
		io.WriteString(w, string(body)+"|"+r.Trailer.Get("X-Sum"))
		w.(http.Flusher).Flush()
		w.Header().Set("X-Cost", "7")
	})
	addr := startProxy(t, &Server{Handler: &testProxy{pool: &Pool{}, addr: hostOf(b.Server)}})
	c, br := dialProxy(t, addr)
	io.WriteString(c, "POST /t HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n"+
		"5;ext=\"q\"\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 11\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	if string(got) != "hello world|11" || resp.Trailer.Get("X-Cost") != "7" {
		t.Fatalf("body %q trailer %q", got, resp.Trailer)
	}

	// An HTTP/1.0 client gets the chunked response decoded, up to the
	// close.
	out := roundTrip(t, addr, "POST /t HTTP/1.0\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi")
	if !strings.HasPrefix(out, "HTTP/1.1 200 OK\r\nConnection: close\r\n") || strings.Contains(out, "chunked") ||
		!strings.HasSuffix(out, "\r\n\r\nhi|") {
		t.Fatalf("HTTP/1.0 answer %q", out)
	}
}

// TestExpectContinue: a request the handler refuses gets its 413 and no
// 100 (and the connection closes: the body may follow); an accepted one
// gets the 100, then sends its body.
func TestExpectContinue(t *testing.T) {
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.Copy(w, r.Body) })
	p := &testProxy{pool: &Pool{}, addr: hostOf(b.Server), refuse: func(r *Request) int {
		if r.Length > 10 {
			return 413
		}
		return 0
	}}
	addr := startProxy(t, &Server{Handler: p})

	c, br := dialProxy(t, addr)
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 11\r\n\r\n")
	line, _ := br.ReadString('\n')
	if line != "HTTP/1.1 413 Request Entity Too Large\r\n" {
		t.Fatalf("first line %q, want the 413", line)
	}
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "Connection: close\r\n") {
		t.Fatalf("413 without Connection: close: %q", rest)
	}

	c, br = dialProxy(t, addr)
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
	if line, _ := br.ReadString('\n'); line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("first line %q, want the 100", line)
	}
	br.ReadString('\n')
	io.WriteString(c, "hello")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(got) != "hello" {
		t.Fatalf("%d %q", resp.StatusCode, got)
	}
}

// TestEarlyHintsForwarded passes a 103 before the final response.
func TestEarlyHintsForwarded(t *testing.T) {
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</s.css>; rel=preload")
		w.WriteHeader(103)
		io.WriteString(w, "done")
	})
	addr := startProxy(t, &Server{Handler: &testProxy{pool: &Pool{}, addr: hostOf(b.Server)}})
	out := roundTrip(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	if !strings.HasPrefix(out, "HTTP/1.1 103 Early Hints\r\n") || !strings.Contains(out, "Link: </s.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\n") {
		t.Fatalf("answer %q", out)
	}
}

// TestUpgradeTunnel switches a WebSocket-like upgrade to a tunnel, and
// drops "Upgrade: h2c".
func TestUpgradeTunnel(t *testing.T) {
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			io.WriteString(w, "upgrade="+r.Header.Get("Upgrade")+" settings="+r.Header.Get("HTTP2-Settings"))
			return
		}
		c, brw, _ := w.(http.Hijacker).Hijack()
		defer c.Close()
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		line, _ := brw.ReadString('\n')
		io.WriteString(c, "echo: "+line)
	})
	addr := startProxy(t, &Server{Handler: &testProxy{pool: &Pool{}, addr: hostOf(b.Server), upgrade: true}})
	c, br := dialProxy(t, addr)
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nping\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatal(resp, err)
	}
	if line, _ := br.ReadString('\n'); line != "echo: ping\n" {
		t.Fatalf("tunnel %q", line)
	}

	out := roundTrip(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\nConnection: close\r\n\r\n")
	if !strings.HasSuffix(out, "upgrade= settings=") {
		t.Fatalf("h2c upgrade reached the backend: %q", out)
	}
}

// TestServerSentEventsFlushed: each event reaches the client while the
// backend still holds the response open.
func TestServerSentEventsFlushed(t *testing.T) {
	release := make(chan struct{})
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "data: two\n\n")
	})
	addr := startProxy(t, &Server{Handler: &testProxy{pool: &Pool{}, addr: hostOf(b.Server)}})
	c, br := dialProxy(t, addr)
	io.WriteString(c, "GET /events HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	close(release)
	if line != "data: one\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
}

// TestTimeouts: a head that stalls is cut at ReadHeaderTimeout, a body
// that stalls at BodyTimeout, a client that stops reading at
// WriteTimeout.
func TestTimeouts(t *testing.T) {
	const d = 200 * time.Millisecond
	bodyErr, writeErr := make(chan error, 1), make(chan error, 1)
	h := HandlerFunc(func(w *ResponseWriter, r *Request) {
		if r.Target() == "/body" {
			_, err := io.ReadAll(r.Body)
			bodyErr <- err
			w.CloseAfter()
			w.WriteHead([]byte("HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"), NoBody, 0)
			return
		}
		w.WriteHead([]byte("HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n"), Length, 1<<30)
		chunk := make([]byte, 1<<20)
		for {
			if _, err := w.Write(chunk); err != nil {
				writeErr <- err
				return
			}
		}
	})
	addr := startProxy(t, &Server{Handler: h, ReadHeaderTimeout: d, BodyTimeout: d, WriteTimeout: d})

	c, _ := dialProxy(t, addr)
	start := time.Now()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost:")
	if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) || time.Since(start) < d {
		t.Fatalf("stalled head: %d %v after %v", n, err, time.Since(start))
	}

	c, _ = dialProxy(t, addr)
	start = time.Now()
	io.WriteString(c, "POST /body HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc")
	if err := <-bodyErr; !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) < d {
		t.Fatalf("stalled body: %v after %v", err, time.Since(start))
	}

	c, _ = dialProxy(t, addr)
	start = time.Now()
	io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
	if err := <-writeErr; !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) < d {
		t.Fatalf("client not reading: %v after %v", err, time.Since(start))
	}
}

// TestHeadValidWhileBodyRead: the head's strings stay as sent while a
// chunked body many times the buffer's size is read (the buffer is
// refilled and compacted meanwhile).
func TestHeadValidWhileBodyRead(t *testing.T) {
	got := make(chan string, 1)
	h := HandlerFunc(func(w *ResponseWriter, r *Request) {
		n, err := io.Copy(io.Discard, r.Body)
		v, _ := r.Get("X-Check")
		got <- r.Method() + " " + r.Target() + " " + v + " " + strconv.FormatInt(n, 10) + " " + strconv.FormatBool(err == nil)
		w.WriteHead([]byte("HTTP/1.1 204 No Content\r\n\r\n"), NoBody, 0)
	})
	addr := startProxy(t, &Server{Handler: h})
	var body strings.Builder
	for i := 0; i < 3000; i++ {
		body.WriteString("a\r\n0123456789\r\n")
	}
	raw := "POST /keep/this HTTP/1.1\r\nHost: a\r\nX-Check: intact\r\nTransfer-Encoding: chunked\r\n\r\n" +
		body.String() + "0\r\nX-T: 1\r\n\r\n"
	c, br := dialProxy(t, addr)
	go io.WriteString(c, raw)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 204 {
		t.Fatal(resp, err)
	}
	if s := <-got; s != "POST /keep/this intact 30000 true" {
		t.Fatalf("after the body: %q", s)
	}
}

// TestUnreadBodyDrained: a body the handler leaves unread is read and
// dropped, so a request pipelined after it is served as sent; one over
// the discard bound closes the connection instead.
func TestUnreadBodyDrained(t *testing.T) {
	addr := startProxy(t, &Server{Handler: h1Answer})
	out := roundTrip(t, addr, "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nGET\r\n0\r\n\r\n"+
		"POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 9\r\n\r\nGET / HTTGET /c HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	if n := strings.Count(out, "HTTP/1.1 200 OK\r\n"); n != 3 || strings.Contains(out, "400") {
		t.Fatalf("%d answers: %q", n, out)
	}
	c, br := dialProxy(t, addr)
	io.WriteString(c, "POST /big HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n")
	go c.Write(make([]byte, 1000000))
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	c.SetReadDeadline(time.Now().Add(5 * time.Second)) // the lingering close reads the rest first
	// The close: EOF, or a reset when the client's unread bytes arrive
	// after the lingering close gave up on them.
	if b, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after a large unread body: %q %v, want the close", b, err)
	}
}

// TestHandlerPanicRecovered: a panicking handler closes its connection;
// the server goes on and is told.
func TestHandlerPanicRecovered(t *testing.T) {
	told := make(chan any, 1)
	h := HandlerFunc(func(w *ResponseWriter, r *Request) {
		if r.Target() == "/panic" {
			panic("boom")
		}
		h1Answer(w, r)
	})
	addr := startProxy(t, &Server{Handler: h, Panicked: func(v any, _ []byte) { told <- v }})
	if out := roundTrip(t, addr, "GET /panic HTTP/1.1\r\nHost: a\r\n\r\n"); out != "" {
		t.Fatalf("answer %q", out)
	}
	if v := <-told; v != "boom" {
		t.Fatalf("told %v", v)
	}
	if out := roundTrip(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"); !strings.HasPrefix(out, "HTTP/1.1 200 OK") {
		t.Fatalf("after the panic: %q", out)
	}
}
