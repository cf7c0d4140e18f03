package e2e

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/rlproxytest"
)

// TestFidelityEarlyHintsQuotaHeaders: on a limited route a 103 Early Hints
// reaches the client without rlproxy's quota headers and the final 200
// carries them (ReverseProxy clears the header map after a 1xx).
func TestFidelityEarlyHintsQuotaHeaders(t *testing.T) {
	t.Parallel()
	up := rlproxytest.NewUpstream(t)
	up.Handler = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header()["Content-Type"] = nil // the upstream's net/http must not sniff one either
		_, _ = io.WriteString(w, "<html>page</html>")
	}
	in := e2eStartBehind(t, "memory", up.URL, `
upstreams: { app: { url: %q } }
policies: { api: { algorithm: token_bucket, rate: 10r/s, burst: 5, key: ip } }
routes: [ { name: r, upstream: app, policies: [api] } ]
`)
	for _, method := range []string{http.MethodGet, http.MethodPost} { // direct transport, http.Transport
		var early []textproto.MIMEHeader
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			early = append(early, h)
			return nil
		}}
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader("x")
		}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), method, in.URL+"/", body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if len(early) != 1 || early[0].Get("Link") == "" || early[0].Get("RateLimit") != "" || early[0].Get("RateLimit-Policy") != "" {
			t.Errorf("%s: 1xx headers %v, want one 103 with Link and no quota headers", method, early)
		}
		if resp.StatusCode != 200 || resp.Header.Get("RateLimit") == "" || resp.Header.Get("RateLimit-Policy") == "" {
			t.Errorf("%s: final %d RateLimit %q, want 200 with quota headers", method, resp.StatusCode, resp.Header.Get("RateLimit"))
		}
		if ct, ok := resp.Header["Content-Type"]; ok {
			t.Errorf("%s: final Content-Type %q invented (the upstream sent none)", method, ct)
		}
	}
}

// TestFidelityForwardingAndErrors: the upstream gets X-Real-IP = the
// resolved client, never the client's own; TRACE is 405 and never
// forwarded; a malformed chunked body is 400 counted as a client error,
// not an upstream error; an upstream slower than response_header_timeout
// is 504 gateway-timeout with its own metric reason.
func TestFidelityForwardingAndErrors(t *testing.T) {
	t.Parallel()
	up := rlproxytest.NewUpstream(t)
	up.Handler = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
		}
		_, _ = io.WriteString(w, "ok")
	}
	in := e2eStartBehind(t, "memory", up.URL, `
upstreams: { app: { url: %q, response_header_timeout: 300ms } }
routes: [ { name: r, upstream: app } ]
`)
	rlproxytest.Get(t, nil, in.URL+"/ip", "X-Real-IP", "6.6.6.6")
	reqs := up.Requests()
	if len(reqs) != 1 || reqs[0].Header.Get("X-Real-IP") != "127.0.0.1" || len(reqs[0].Header.Values("X-Real-IP")) != 1 {
		t.Fatalf("upstream X-Real-IP %q, want only 127.0.0.1", reqs[0].Header.Values("X-Real-IP"))
	}
	if resp, body := rlproxytest.Get(t, nil, in.URL+"/slow"); resp.StatusCode != 504 || !strings.Contains(body, "urn:rlproxy:problem:gateway-timeout") {
		t.Errorf("slow upstream: %d %q, want 504 gateway-timeout", resp.StatusCode, body)
	}
	before := up.Count()
	for i, c := range []struct{ raw, want string }{
		{"TRACE / HTTP/1.1\r\nHost: h\r\nCookie: s=1\r\n\r\n", "HTTP/1.1 405 "},
		{"POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", "HTTP/1.1 400 "},
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(in.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(conn, c.raw)
		line, _ := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if !strings.HasPrefix(line, c.want) {
			t.Errorf("%q: status line %q, want %q", strings.SplitN(c.raw, "\r\n", 2)[0], line, c.want)
		}
		// The malformed body's request may reach the upstream before
		// the bad chunk does; TRACE never does.
		if n := up.Count(); i == 0 && n != before {
			t.Errorf("TRACE reached the upstream")
		}
	}
	_, s := opsScrape(t, in)
	for _, m := range []struct {
		name string
		kv   []string
		want float64
	}{
		{"rlproxy_proxy_errors_total", []string{"route", "r", "reason", "upstream_timeout"}, 1},
		{"rlproxy_proxy_errors_total", []string{"route", "r", "reason", "client_body"}, 1},
		// The 504 is the upstream's fault and counts; the client's
		// malformed body does not.
		{"rlproxy_upstream_errors_total", []string{"route", "r"}, 1},
	} {
		if got := opsValue(t, s, m.name, m.kv...); got != m.want {
			t.Errorf("%s%v = %v, want %v", m.name, m.kv, got, m.want)
		}
	}
}
