package h1

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// h1Answer answers with the protocol and TLS state the engine saw.
var h1Answer = HandlerFunc(func(w *ResponseWriter, r *Request) {
	body := "h1 " + r.Proto() + " tls=" + strconv.FormatBool(r.TLS != nil)
	if r.TLS != nil {
		body += " alpn=" + r.TLS.NegotiatedProtocol
	}
	head := AppendField(AppendStatusLine(w.Scratch(), 200, "OK"), "Content-Length", strconv.Itoa(len(body)))
	w.WriteHead(append(head, "\r\n"...), Length, int64(len(body)))
	io.WriteString(w, body)
})

// startSplit serves ln with the engine, handing HTTP/2 connections to a
// net/http server that answers "h2 " and the protocol.
func startSplit(t *testing.T, ln net.Listener) {
	h2 := NewListener(ln.Addr())
	std := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "h2 "+r.Proto)
	})}
	std.Protocols = new(http.Protocols)
	std.Protocols.SetHTTP1(true)
	std.Protocols.SetHTTP2(true)
	std.Protocols.SetUnencryptedHTTP2(true)
	go std.Serve(h2)
	t.Cleanup(func() { std.Close() })
	startServing(t, ln, &Server{Handler: h1Answer, H2: h2})
}

// startServing runs srv on ln until the test ends.
func startServing(t *testing.T, ln net.Listener, srv *Server) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go srv.ServeConn(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
}

func get(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestALPNSplit: over TLS, "h2" goes to net/http, "http/1.1" stays on
// the engine, with its TLS state.
func TestALPNSplit(t *testing.T) {
	certs := httptest.NewUnstartedServer(nil)
	certs.StartTLS()
	defer certs.Close()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := tls.NewListener(raw, &tls.Config{Certificates: certs.TLS.Certificates, NextProtos: []string{"h2", "http/1.1"}})
	startSplit(t, ln)
	url := "https://" + raw.Addr().String() + "/"
	roots := certs.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs

	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}}
	if got := get(t, h2, url); got != "h2 HTTP/2.0" {
		t.Fatalf("h2 client got %q", got)
	}
	h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, NextProtos: []string{"http/1.1"}},
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}}
	if got := get(t, h1, url); got != "h1 HTTP/1.1 tls=true alpn=http/1.1" {
		t.Fatalf("http/1.1 client got %q", got)
	}
}

// TestH2CPriorKnowledge: a cleartext connection that opens with the
// HTTP/2 preface reaches net/http, the preface replayed; others stay.
func TestH2CPriorKnowledge(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	startSplit(t, ln)
	url := "http://" + ln.Addr().String() + "/"
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	if got := get(t, &http.Client{Transport: tr}, url); got != "h2 HTTP/2.0" {
		t.Fatalf("h2c client got %q", got)
	}
	if got := get(t, &http.Client{Transport: &http.Transport{}}, url); got != "h1 HTTP/1.1 tls=false" {
		t.Fatalf("http/1.1 client got %q", got)
	}
}
