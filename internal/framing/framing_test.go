package framing_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"rlproxy/internal/framing"
)

// serve runs a real net/http server behind the guard whose handler
// answers "METHOD PATH len=N body" (the body it read) and returns its
// address and the number of faults replaced.
func serve(t *testing.T) (string, func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	faults := 0
	gl := &framing.Listener{Listener: ln, OnFault: func() { mu.Lock(); faults++; mu.Unlock() }}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "body: "+err.Error(), 400)
			return
		}
		fmt.Fprintf(w, "%s %s %s len=%d %s", r.Proto, r.Method, r.URL.RequestURI(), len(b), b)
	})}
	go func() { _ = srv.Serve(gl) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return faults }
}

// exchange writes raw (in pieces of at most split bytes, 0 = at once) and
// reads responses until the server closes or stays quiet for 300 ms.
func exchange(t *testing.T, addr, raw string, split int) (bodies []string, statuses []int, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		if split == 0 {
			_, _ = io.WriteString(c, raw)
			return
		}
		for i := 0; i < len(raw); i += split {
			_, _ = io.WriteString(c, raw[i:min(i+split, len(raw))])
			time.Sleep(time.Millisecond)
		}
	}()
	br := bufio.NewReader(c)
	for {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if len(statuses) > 0 {
			_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return bodies, statuses, err == io.EOF || err == io.ErrUnexpectedEOF
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		bodies, statuses = append(bodies, string(b)), append(statuses, resp.StatusCode)
		if resp.Close {
			_, err := br.ReadByte()
			return bodies, statuses, err == io.EOF
		}
	}
}

// TestFramingPassesWellFramed: pipelined requests with Content-Length and
// chunked bodies (extensions, trailers), HTTP/1.0 and a leading empty line
// reach the server unchanged, delivered at once and one byte at a time.
func TestFramingPassesWellFramed(t *testing.T) {
	addr, faults := serve(t)
	raw := "GET /a?x=1 HTTP/1.1\r\nHost: h\r\n\r\n" +
		"POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello" +
		"POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n" +
		"\r\nPUT /d HTTP/1.1\r\nhost: h\r\ncontent-length: 2\r\n\r\nok" +
		"GET /e HTTP/1.1\nHost: h\n\n"
	want := []string{"HTTP/1.1 GET /a?x=1 len=0 ", "HTTP/1.1 POST /b len=5 hello", "HTTP/1.1 POST /c len=5 abcde", "HTTP/1.1 PUT /d len=2 ok", "HTTP/1.1 GET /e len=0 "}
	for _, split := range []int{0, 1, 7} {
		bodies, _, _ := exchange(t, addr, raw, split)
		if strings.Join(bodies, "|") != strings.Join(want, "|") {
			t.Errorf("split %d:\n got  %q\n want %q", split, bodies, want)
		}
	}
	bodies, _, closed := exchange(t, addr, "POST /old HTTP/1.0\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc", 0)
	if len(bodies) != 1 || bodies[0] != "HTTP/1.0 POST /old len=3 abc" || !closed {
		t.Errorf("HTTP/1.0: %q closed=%v", bodies, closed)
	}
	if n := faults(); n != 0 {
		t.Errorf("%d faults on well-framed requests", n)
	}
}

// TestFramingRefusesAmbiguous: Content-Length with Transfer-Encoding,
// HTTP/1.0 with Transfer-Encoding and obs-fold get net/http's 400 and the
// connection closed; the bytes after them (a smuggled request) are never
// served, and the requests before them are.
func TestFramingRefusesAmbiguous(t *testing.T) {
	addr, faults := serve(t)
	ok := "GET /first HTTP/1.1\r\nHost: h\r\n\r\n"
	smuggled := "GET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n"
	for i, bad := range []string{
		"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST /p HTTP/1.0\r\nHost: h\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"GET /p HTTP/1.1\r\nHost: h\r\nX-Folded: a\r\n b\r\n\r\n",
	} {
		for _, split := range []int{0, 3} {
			bodies, statuses, closed := exchange(t, addr, ok+bad+smuggled, split)
			if len(statuses) != 2 || statuses[0] != 200 || statuses[1] != 400 || !closed {
				t.Errorf("case %d split %d: statuses %v bodies %q closed=%v, want [200 400] and closed", i, split, statuses, bodies, closed)
			}
		}
	}
	if n := faults(); n != 6 {
		t.Errorf("faults counted %d, want 6", n)
	}
}

// TestFramingPassthrough: the HTTP/2 preface (h2c) and an upgrade stop the
// guarding: a prior-knowledge HTTP/2 client and a raw upgraded stream work.
func TestFramingPassthrough(t *testing.T) {
	addr, _ := serve(t)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	resp, err := (&http.Client{Transport: tr}).Post("http://"+addr+"/h2", "text/plain", strings.NewReader("xyz"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "HTTP/2.0 POST /h2 len=3 xyz" {
		t.Errorf("h2c: %q", b)
	}
	bodies, _, _ := exchange(t, addr, "GET /u HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\nGET /after HTTP/1.1\r\nHost: h\r\n\r\n", 0)
	if len(bodies) != 2 || !strings.Contains(bodies[1], "/after") {
		t.Errorf("after an upgrade request (not switched): %q", bodies)
	}
}

// TestFramingOddVersionKeepsGuarding: net/http serves HTTP/1.2 as
// HTTP/1.1 on a kept-alive connection, so the guard keeps checking after
// it: an obs-fold or Content-Length with Transfer-Encoding in the next
// request still gets 400 and a close, and the bytes after are never served.
func TestFramingOddVersionKeepsGuarding(t *testing.T) {
	addr, faults := serve(t)
	odd := "GET /odd HTTP/1.2\r\nHost: h\r\n\r\n"
	smuggled := "GET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n"
	for i, bad := range []string{
		"GET /p HTTP/1.1\r\nHost: h\r\nX-Folded: a\r\n b\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	} {
		bodies, statuses, closed := exchange(t, addr, odd+bad+smuggled, 0)
		if len(statuses) != 2 || statuses[0] != 200 || bodies[0] != "HTTP/1.2 GET /odd len=0 " || statuses[1] != 400 || !closed {
			t.Errorf("case %d: statuses %v bodies %q closed=%v, want [200 400] and closed", i, statuses, bodies, closed)
		}
	}
	if n := faults(); n != 2 {
		t.Errorf("faults counted %d, want 2", n)
	}
}
