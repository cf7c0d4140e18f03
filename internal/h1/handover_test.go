package h1

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tlsKey carries a handed-over connection's TLS state to the fallback
// server's handlers.
type tlsKey struct{}

// startFallback serves ln with srv, its Fallback served by a net/http
// server that answers "std <method> <path> <body> from=<peer>" and, on
// TLS, the state TLSState kept; /up signals gotHead before reading its
// body.
func startFallback(t *testing.T, ln net.Listener, srv *Server, gotHead chan struct{}) *http.Server {
	srv.Fallback = NewListener(ln.Addr())
	std := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/up" {
				gotHead <- struct{}{}
			}
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "std %s %s %s from=%s", r.Method, r.URL.Path, body, r.RemoteAddr)
			if st, _ := r.Context().Value(tlsKey{}).(*tls.ConnectionState); st != nil {
				fmt.Fprintf(w, " tls=%s peers=%d", st.NegotiatedProtocol, len(st.PeerCertificates))
			}
		}),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, tlsKey{}, TLSState(c))
		},
	}
	go std.Serve(srv.Fallback)
	t.Cleanup(func() { std.Close() })
	startServing(t, ln, srv)
	return std
}

// handOverAll answers /engine… itself and hands every other request over.
var handOverAll = HandlerFunc(func(w *ResponseWriter, r *Request) {
	if !strings.HasPrefix(r.Target(), "/engine") {
		if err := w.HandOver(); err != nil {
			panic(err)
		}
		return
	}
	body := "engine " + r.Target()
	head := AppendField(AppendStatusLine(w.Scratch(), 200, "OK"), "Content-Length", strconv.Itoa(len(body)))
	w.WriteHead(append(head, "\r\n"...), Length, int64(len(body)))
	io.WriteString(w, body)
})

func readAnswer(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHandOverPipelined: of three pipelined requests the engine answers
// the first and hands the second over with its body; net/http answers
// the second and third in order on the same connection, and keeps it
// for a request sent later, which the engine never sees.
func TestHandOverPipelined(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	startFallback(t, ln, &Server{Handler: handOverAll}, nil)
	c, br := dialProxy(t, ln.Addr().String())
	from := " from=" + c.LocalAddr().String()
	io.WriteString(c, "GET /engine1 HTTP/1.1\r\nHost: a\r\n\r\n"+
		"POST /std HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"+
		"GET /after HTTP/1.1\r\nHost: a\r\n\r\n")
	for _, want := range []string{"engine /engine1", "std POST /std hello" + from, "std GET /after " + from} {
		if got := readAnswer(t, br); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	io.WriteString(c, "GET /engine2 HTTP/1.1\r\nHost: a\r\n\r\n")
	if got, want := readAnswer(t, br), "std GET /engine2 "+from; got != want {
		t.Fatalf("kept connection: got %q, want %q", got, want)
	}
}

// TestHandOverBodyLater: a body that arrives after the head was handed
// over is read by net/http from the connection itself.
func TestHandOverBodyLater(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gotHead := make(chan struct{}, 1)
	startFallback(t, ln, &Server{Handler: handOverAll}, gotHead)
	c, br := dialProxy(t, ln.Addr().String())
	io.WriteString(c, "POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
	<-gotHead
	io.WriteString(c, "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
	if got, want := readAnswer(t, br), "std POST /up abcde from="+c.LocalAddr().String(); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestHandOverRefused: HandOver after a head, a 100 Continue or a body
// read, or without a Fallback, is an error and the engine answers.
func TestHandOverRefused(t *testing.T) {
	errs := make(chan error, 1)
	h := HandlerFunc(func(w *ResponseWriter, r *Request) {
		switch r.Target() {
		case "/head":
			w.WriteHead([]byte("HTTP/1.1 204 No Content\r\n\r\n"), NoBody, 0)
		case "/continue":
			w.Continue()
		case "/body":
			r.Body.Read(make([]byte, 1))
		}
		errs <- w.HandOver()
		if !w.wroteHead {
			w.WriteHead([]byte("HTTP/1.1 204 No Content\r\n\r\n"), NoBody, 0)
		}
	})
	for _, tc := range []struct {
		req       string
		fallback  bool
		want      error
		wantState int
	}{
		{"GET /head HTTP/1.1\r\nHost: a\r\n\r\n", true, ErrHeadWritten, 204},
		{"POST /continue HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n", true, ErrHeadWritten, 100},
		{"POST /body HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nxy", true, ErrBodyRead, 204},
		{"GET /none HTTP/1.1\r\nHost: a\r\n\r\n", false, ErrNoFallback, 204},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &Server{Handler: h}
		if tc.fallback {
			startFallback(t, ln, srv, nil)
		} else {
			startServing(t, ln, srv)
		}
		c, br := dialProxy(t, ln.Addr().String())
		io.WriteString(c, tc.req)
		if err := <-errs; !errors.Is(err, tc.want) {
			t.Errorf("%q: HandOver = %v, want %v", tc.req, err, tc.want)
		}
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != tc.wantState {
			t.Errorf("%q: answer %v %v, want %d from the engine", tc.req, resp, err, tc.wantState)
		}
	}
}

// TestHandOverShutdown: a handed-over connection is net/http's: the
// engine's Shutdown returns without waiting for it, net/http's Shutdown
// closes it once idle.
func TestHandOverShutdown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Handler: handOverAll}
	std := startFallback(t, ln, srv, nil)
	c, br := dialProxy(t, ln.Addr().String())
	io.WriteString(c, "GET /std HTTP/1.1\r\nHost: a\r\n\r\n")
	readAnswer(t, br)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("engine Shutdown with a handed-over connection: %v", err)
	}
	io.WriteString(c, "GET /still HTTP/1.1\r\nHost: a\r\n\r\n")
	if got := readAnswer(t, br); !strings.HasPrefix(got, "std GET /still ") {
		t.Fatalf("after the engine's Shutdown: %q", got)
	}
	if err := std.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("after net/http's Shutdown: %v, want EOF", err)
	}
}

// TestHandOverTLS: a TLS connection handed over keeps its state for the
// fallback's handlers (TLSState through ConnContext), client certificate
// included.
func TestHandOverTLS(t *testing.T) {
	certs := httptest.NewUnstartedServer(nil)
	certs.StartTLS()
	defer certs.Close()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := tls.NewListener(raw, &tls.Config{Certificates: certs.TLS.Certificates,
		NextProtos: []string{"http/1.1"}, ClientAuth: tls.RequestClientCert})
	startFallback(t, ln, &Server{Handler: handOverAll}, nil)
	roots := certs.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots,
		NextProtos: []string{"http/1.1"}, Certificates: certs.TLS.Certificates}}}
	got := get(t, client, "https://"+raw.Addr().String()+"/std")
	if !strings.HasPrefix(got, "std GET /std  from=") || !strings.HasSuffix(got, " tls=http/1.1 peers=1") {
		t.Fatalf("got %q, want the TLS state with one peer certificate", got)
	}
}

// TestConnIdle: the hook hears each request's head (active) and each wait
// for the next request after a response (idle), not the first wait.
func TestConnIdle(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	states := make(chan bool, 8)
	startServing(t, ln, &Server{Handler: handOverAll, ConnIdle: func(_ net.Conn, idle bool) { states <- idle }})
	c, br := dialProxy(t, ln.Addr().String())
	for range 2 {
		io.WriteString(c, "GET /engine HTTP/1.1\r\nHost: a\r\n\r\n")
		readAnswer(t, br)
	}
	got := []bool{<-states, <-states, <-states, <-states}
	if fmt.Sprint(got) != "[false true false true]" {
		t.Fatalf("states %v, want active, idle, active, idle", got)
	}
}
