package e2e

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/rlproxytest"
)

// engineStricter names the cases the HTTP/1.1 engine (server.engine:
// auto) refuses, with the status it answers, and std serves: the
// parser's rules that net/http does not apply (docs/ENGINE.md lists them;
// docs/reference/config.md, "Engines").
var engineStricter = map[string]struct {
	why    string
	status int
}{
	"bare-lf":    {"bare_lf: a line ended by LF alone", 400},
	"http12":     {"version: HTTP/1.2, which net/http serves as HTTP/1.1", 400},
	"dup-length": {"duplicate_content_length: the same Content-Length twice", 400},
	"long-line":  {"line_too_long: one header line over 64 KiB", 431},
}

// engineCases are the transparency cases, one of each engineStricter
// case, and targets both engines refuse (the engine's parser on auto,
// the request view on std).
func engineCases() []transparencyCase {
	return append(transparencyCases(),
		transparencyCase{name: "bare-lf", raw: "GET / HTTP/1.1\nHost: h\n\n"},
		transparencyCase{name: "http12", raw: "GET / HTTP/1.2\r\nHost: h\r\n\r\n"},
		transparencyCase{name: "fragment", raw: "GET /a#b HTTP/1.1\r\nHost: h\r\n\r\n"},
		transparencyCase{name: "dup-length", raw: "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab"},
		transparencyCase{name: "long-line", raw: "GET / HTTP/1.1\r\nHost: h\r\nX-Long: " + strings.Repeat("l", 65<<10) + "\r\n\r\n"},
		transparencyCase{name: "asterisk-get", raw: "GET * HTTP/1.1\r\nHost: h\r\n\r\n"},
	)
}

// TestEnginesUpstreamView sends the same raw requests (the nginx
// transparency cases) through rlproxy on each engine, both in front of one
// raw upstream, and wants the same status class, request line, body and
// end-to-end header fields (names compared case-insensitively, in name
// order: the documented difference of order and case) — or, for a case in
// engineStricter, a 400 on auto that reaches no upstream.
func TestEnginesUpstreamView(t *testing.T) {
	up := newRawUpstream(t)
	start := func(engine string) string {
		in := rlproxytest.Start(t, fmt.Sprintf(`
server: { engine: %s }
upstreams: { raw: { url: "http://%s" } }
policies: { big: { algorithm: token_bucket, rate: 1000r/s, burst: 1000, key: ip } }
routes: [ { name: all, upstream: raw, policies: [big] } ]
`, engine, up.addr()))
		return strings.TrimPrefix(in.URL, "http://")
	}
	auto, std := start("auto"), start("std")
	for _, c := range engineCases() {
		a := sendRaw(t, auto, c, up)
		s := sendRaw(t, std, c, up)
		if c.closes && (!a.closed || !s.closed) {
			t.Errorf("%s: connection closed after the answer: auto %v, std %v; want both", c.name, a.closed, s.closed)
		}
		if d, ok := engineStricter[c.name]; ok {
			if a.status != d.status || len(a.reqs) != 0 {
				t.Errorf("%s (auto stricter: %s): auto %d with %d upstream requests, want %d and none", c.name, d.why, a.status, len(a.reqs), d.status)
			}
			t.Logf("%s: auto %d, std %d with %d upstream requests", c.name, a.status, s.status, len(s.reqs))
			continue
		}
		if err := compareEngines(a, s); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// compareEngines wants the same status and upstream view from both
// engines; X-Forwarded-For is compared too (both add the same client).
func compareEngines(a, s *transparencyOutcome) error {
	if a.status != s.status {
		return fmt.Errorf("status auto %d, std %d", a.status, s.status)
	}
	if len(a.reqs) != len(s.reqs) {
		return fmt.Errorf("upstream got %d requests from auto, %d from std", len(a.reqs), len(s.reqs))
	}
	for i := range a.reqs {
		ra, rs := &a.reqs[i], &s.reqs[i]
		if ra.line != rs.line || ra.body != rs.body {
			return fmt.Errorf("request auto %q %q, std %q %q", ra.line, ra.body, rs.line, rs.body)
		}
		if ha, hs := endToEnd(ra), endToEnd(rs); !slices.Equal(ha, hs) {
			return fmt.Errorf("headers\n auto %q\n std  %q", ha, hs)
		}
		for _, name := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Real-IP"} {
			va, _ := ra.header(name)
			vs, _ := rs.header(name)
			if va != vs {
				return fmt.Errorf("%s auto %q, std %q", name, va, vs)
			}
		}
	}
	return nil
}

// TestMTLSHTTP11: client certificates over HTTP/1.1 (ALPN http/1.1, no
// HTTP/2): each certificate gets its own quota under a tls:spki key on
// one keep-alive connection, and the upstream sees X-Forwarded-Proto https
// and the verified subject — on auto too, where the engine reads the
// first request of the connection and net/http the rest.
func TestMTLSHTTP11(t *testing.T) {
	e := startMTLS(t, "require", false)
	h11 := func(cert *tls.Certificate) *http.Client {
		cfg := &tls.Config{RootCAs: e.roots, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"},
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: 1}, Timeout: 10 * time.Second}
		t.Cleanup(c.CloseIdleConnections)
		return c
	}
	ca, cb := h11(&e.a), h11(&e.b)
	got := []int{e.get(t, ca), e.get(t, ca), e.get(t, ca), e.get(t, cb), e.get(t, cb), e.get(t, cb)}
	if want := []int{200, 200, 429, 200, 200, 429}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("statuses a,a,a,b,b,b = %v, want %v (a quota of 2 per certificate)", got, want)
	}
	reqs := e.up.Requests()
	if len(reqs) != 4 {
		t.Fatalf("upstream saw %d requests, want 4", len(reqs))
	}
	for i, r := range reqs {
		subject := "CN=client-a,O=rlproxy test"
		if i >= 2 {
			subject = "CN=client-b,O=rlproxy test"
		}
		if p := r.Header.Get("X-Forwarded-Proto"); p != "https" {
			t.Errorf("request %d: X-Forwarded-Proto %q, want https", i, p)
		}
		if s := r.Header.Values("X-Client-Cert-Subject"); len(s) != 1 || s[0] != subject {
			t.Errorf("request %d: X-Client-Cert-Subject %q, want [%s]", i, s, subject)
		}
	}
}
