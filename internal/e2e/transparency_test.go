package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/nginxtest"
	"rlproxy/internal/testutil/rlproxytest"
)

// transparencyCase is one raw request sent through nginx and rlproxy. The
// header "X-Case: name" is inserted after its request line, so the upstream
// can tell the cases apart. diff, when set, names the documented
// difference (transparencyDiffs) the case shows instead of equality.
type transparencyCase struct {
	name, raw, diff string
	// closes: both proxies must close the connection after the response
	// (ambiguous framing: no leftover byte may be read as a request).
	closes bool
}

// transparencyOutcome is what one proxy did with a case: the client's
// status (0: no response), whether the proxy closed the connection after
// it (checked only for cases that need it), the requests the upstream got
// and the response's header.
type transparencyOutcome struct {
	status int
	closed bool
	reqs   []rawRequest
	header http.Header
}

// transparencyDiff is one intended difference from nginx proxy_pass
// (docs/reference/config.md lists the same ones, "Differences from nginx
// proxy_pass"). check says what each side must do instead of matching.
type transparencyDiff struct {
	doc   string
	check func(ng, rl *transparencyOutcome) error
}

// Differences the comparison always allows (not per case): rlproxy adds
// X-Forwarded-For, X-Forwarded-Host, X-Forwarded-Proto and X-Real-IP (the
// pinned nginx configuration sets none); header names are compared
// case-insensitively and in name order (net/http sends canonical names,
// sorted; the values of one name keep their order); Content-Length and
// Transfer-Encoding are framing and the body is compared de-chunked;
// response-side headers other than Content-Type are not compared (rlproxy
// adds its quota headers).
var transparencyIgnored = []string{"x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-real-ip",
	"content-length", "transfer-encoding", "connection"}

var transparencyDiffs = map[string]transparencyDiff{

	"expect": {
		doc: "Expect: 100-continue: nginx answers 100 itself and drops the header; rlproxy forwards it and relays the upstream's 100",
		check: func(ng, rl *transparencyOutcome) error {
			_, ngHas := firstHeader(ng, "Expect")
			v, _ := firstHeader(rl, "Expect")
			if ng.status != 200 || rl.status != 200 || ngHas || v != "100-continue" || ng.reqs[0].body != rl.reqs[0].body {
				return fmt.Errorf("nginx %d has=%v; rlproxy %d Expect %q", ng.status, ngHas, rl.status, v)
			}
			return nil
		},
	},
	"invalid-name": {
		doc: "a header name with a character other than letters, digits, '-' and '_': nginx drops it (ignore_invalid_headers); rlproxy forwards it (a valid RFC 9110 token)",
		check: func(ng, rl *transparencyOutcome) error {
			_, ngHas := firstHeader(ng, "X.Dot")
			_, rlHas := firstHeader(rl, "X.Dot")
			if ng.status != 200 || rl.status != 200 || ngHas || !rlHas {
				return fmt.Errorf("nginx %d has=%v; rlproxy %d has=%v", ng.status, ngHas, rl.status, rlHas)
			}
			return nil
		},
	},
	"http10-nohost": {
		doc: "HTTP/1.0 without Host: nginx sends an empty Host ($http_host); rlproxy sends the upstream URL's host[:port]",
		check: func(ng, rl *transparencyOutcome) error {
			nh, _ := firstHeader(ng, "Host")
			rh, _ := firstHeader(rl, "Host")
			if ng.status != 200 || rl.status != 200 || nh != "" || rh == "" {
				return fmt.Errorf("nginx %d Host %q; rlproxy %d Host %q", ng.status, nh, rl.status, rh)
			}
			return nil
		},
	},
	"connect": {
		doc: "CONNECT: nginx 400 (no such method for a location); rlproxy 405 (never forwarded, as TRACE)",
		check: func(ng, rl *transparencyOutcome) error {
			if ng.status/100 != 4 || rl.status != 405 || len(ng.reqs)+len(rl.reqs) != 0 {
				return fmt.Errorf("nginx %d; rlproxy %d; upstream %d+%d", ng.status, rl.status, len(ng.reqs), len(rl.reqs))
			}
			return nil
		},
	},
}

func firstHeader(o *transparencyOutcome, name string) (string, bool) {
	if len(o.reqs) == 0 {
		return "", false
	}
	return o.reqs[0].header(name)
}

// transparencyCases: the cases plus ordinary ones.
func transparencyCases() []transparencyCase {
	big := strings.Repeat("b", 7*1024)
	many := ""
	for i := range 60 {
		many += fmt.Sprintf("X-H%d: v%d\r\n", i, i)
	}
	return []transparencyCase{
		{name: "root", raw: "GET / HTTP/1.1\r\nHost: example.test\r\n\r\n"},
		{name: "semicolon-query", raw: "GET /?page=2&sort=name;desc HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "semicolon-first", raw: "GET /?fields=id;name&z=1 HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "bad-escape-query", raw: "GET /?b=2&a=1&bad=%ZZ HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "plus-query", raw: "GET /search?q=a+b&q=c+d HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "empty-values", raw: "GET /?a=&b=&=c&& HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "empty-query", raw: "GET /x? HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "repeated-keys", raw: "GET /?a=3&a=1&a=2 HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "escaped-query", raw: "GET /?x=%20%2B%26%3D&y=%e2%9c%93 HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "encoded-slash", raw: "GET /a%2Fb/c%2f HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "double-slash", raw: "GET //double//slash HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "unicode-escaped", raw: "GET /caf%C3%A9/%E2%9C%93 HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "unicode-raw", raw: "GET /caf\xc3\xa9?q=\xe2\x9c\x93 HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "dot-segments", raw: "GET /a/./b/../c HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "tilde-escaped", raw: "GET /%7Euser/%41 HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "path-params", raw: "GET /seg;p=1/x;y HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "long-url", raw: "GET /" + strings.Repeat("p", 3000) + "?" + strings.Repeat("q", 1000) + " HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "head", raw: "HEAD /h HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "post-length", raw: "POST /p HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"a\":\"b;c\"}\n\n"},
		{name: "post-chunked", raw: "POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"},
		{name: "put", raw: "PUT /r/1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"},
		{name: "patch", raw: "PATCH /r/1 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}"},
		{name: "delete", raw: "DELETE /r/1 HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "options", raw: "OPTIONS /r HTTP/1.1\r\nHost: h\r\nOrigin: https://a.test\r\nAccess-Control-Request-Method: PUT\r\n\r\n"},
		{name: "custom-method", raw: "PURGE /cache HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "http10", raw: "GET /old HTTP/1.0\r\nHost: h\r\n\r\n"},
		{name: "http10-post", raw: "POST /old HTTP/1.0\r\nHost: h\r\nContent-Length: 4\r\n\r\nbody"},
		{name: "http10-nohost", raw: "GET /old HTTP/1.0\r\n\r\n", diff: "http10-nohost"},
		{name: "header-7k", raw: "GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + big + "\r\n\r\n"},
		{name: "many-headers", raw: "GET / HTTP/1.1\r\nHost: h\r\n" + many + "\r\n"},
		{name: "repeated-header", raw: "GET / HTTP/1.1\r\nHost: h\r\nX-Multi: 1\r\nX-Other: z\r\nX-Multi: 2\r\n\r\n"},
		{name: "underscore-header", raw: "GET / HTTP/1.1\r\nHost: h\r\nX_Under: 1\r\n\r\n"},
		{name: "ows-value", raw: "GET / HTTP/1.1\r\nHost: h\r\nX-Spaced: \t a  b \t\r\n\r\n"},
		{name: "cookies", raw: "GET / HTTP/1.1\r\nHost: h\r\nCookie: a=1\r\nCookie: b=2\r\nAuthorization: Bearer t0k\r\n\r\n"},
		{name: "accept-encoding", raw: "GET / HTTP/1.1\r\nHost: h\r\nAccept-Encoding: gzip, br\r\nUser-Agent: probe/1\r\n\r\n"},
		{name: "obs-text-value", raw: "GET / HTTP/1.1\r\nHost: h\r\nX-Latin: caf\xe9\r\n\r\n"},
		{name: "client-x-real-ip", raw: "GET / HTTP/1.1\r\nHost: h\r\nX-Real-IP: 6.6.6.6\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n"},
		{name: "host-with-port", raw: "GET / HTTP/1.1\r\nHost: example.test:8443\r\n\r\n"},
		{name: "no-content-type", raw: "GET /nocontenttype HTTP/1.1\r\nHost: h\r\n\r\n"},
		{name: "no-content-type-post", raw: "POST /nocontenttype HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx"},
		{name: "trace", raw: "TRACE / HTTP/1.1\r\nHost: h\r\nCookie: secret=1\r\n\r\n"},
		{name: "malformed-chunked", raw: "POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"},
		{name: "expect", raw: "POST /p HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\nbody", diff: "expect"},
		{name: "cl-te", raw: "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nX", closes: true},
		{name: "http10-te", raw: "POST /p HTTP/1.0\r\nHost: h\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", closes: true},
		{name: "obs-fold", raw: "GET / HTTP/1.1\r\nHost: h\r\nX-Folded: one\r\n two\r\n\r\n", closes: true},
		{name: "invalid-name", raw: "GET / HTTP/1.1\r\nHost: h\r\nX.Dot: 1\r\n\r\n", diff: "invalid-name"},
		{name: "connect", raw: "CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n", diff: "connect"},
	}
}

// TestNginxTransparency sends the same raw requests to a real nginx
// (proxy_pass, pinned to a transparent configuration) and to rlproxy, both
// in front of one raw-socket upstream that records the bytes it receives,
// and wants, for each case, the same status class at the client and the
// same request line, body and end-to-end headers at the upstream — or,
// for a case that names one, the documented difference
// (transparencyDiffs; docs/reference/config.md, "Differences from nginx proxy_pass").
func TestNginxTransparency(t *testing.T) {
	up := newRawUpstream(t)
	ng := nginxtest.Start(t, fmt.Sprintf(`
    underscores_in_headers on;
    server {
        listen {{listen}};
        client_max_body_size 0;
        location / {
            proxy_pass http://%s;
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header Connection "";
            proxy_request_buffering off;
        }
    }`, up.addr()))
	rl := rlproxytest.Start(t, fmt.Sprintf(`
upstreams: { raw: { url: "http://%s" } }
policies: { big: { algorithm: token_bucket, rate: 1000r/s, burst: 1000, key: ip } }
routes: [ { name: all, upstream: raw, policies: [big] } ]
`, up.addr()))
	rlAddr := strings.TrimPrefix(rl.URL, "http://")
	cases := transparencyCases()
	if len(cases) < 40 {
		t.Fatalf("%d cases, want ≥ 40", len(cases))
	}
	for _, c := range cases {
		d, hasDiff := transparencyDiffs[c.diff]
		if c.diff != "" && !hasDiff {
			t.Fatalf("%s: unknown difference %q", c.name, c.diff)
		}
		ngOut := sendRaw(t, ng.Addr, c, up)
		rlOut := sendRaw(t, rlAddr, c, up)
		if c.closes && (!ngOut.closed || !rlOut.closed) {
			t.Errorf("%s: connection closed after the answer: nginx %v, rlproxy %v; want both", c.name, ngOut.closed, rlOut.closed)
		}
		t.Logf("%s: nginx %d %d reqs; rlproxy %d %d reqs", c.name, ngOut.status, len(ngOut.reqs), rlOut.status, len(rlOut.reqs))
		if hasDiff {
			if err := d.check(ngOut, rlOut); err != nil {
				t.Errorf("%s (documented difference %q): %v", c.name, c.diff, err)
			}
			continue
		}
		if err := compareOutcomes(ngOut, rlOut); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// compareOutcomes wants the same status class, Content-Type presence and
// upstream view (request line, de-chunked body, end-to-end headers).
func compareOutcomes(ng, rl *transparencyOutcome) error {
	if ng.status/100 != rl.status/100 {
		return fmt.Errorf("status nginx %d, rlproxy %d", ng.status, rl.status)
	}
	if _, a := ng.header["Content-Type"]; true {
		if _, b := rl.header["Content-Type"]; a != b {
			return fmt.Errorf("response Content-Type nginx %q, rlproxy %q", ng.header.Get("Content-Type"), rl.header.Get("Content-Type"))
		}
	}
	if len(ng.reqs) != len(rl.reqs) {
		return fmt.Errorf("upstream got %d requests from nginx, %d from rlproxy", len(ng.reqs), len(rl.reqs))
	}
	for i := range ng.reqs {
		a, b := &ng.reqs[i], &rl.reqs[i]
		if a.line != b.line {
			return fmt.Errorf("request line nginx %q, rlproxy %q", a.line, b.line)
		}
		if a.body != b.body {
			return fmt.Errorf("body nginx %q, rlproxy %q", a.body, b.body)
		}
		if ha, hb := endToEnd(a), endToEnd(b); !slices.Equal(ha, hb) {
			return fmt.Errorf("headers\n nginx   %q\n rlproxy %q", ha, hb)
		}
	}
	return nil
}

// endToEnd is r's header lines as "name: value", names lower-cased,
// sorted by name (stable: one name's values keep their order), without
// the always-ignored ones.
func endToEnd(r *rawRequest) []string {
	var out []string
	for _, h := range r.headers {
		k, v, _ := strings.Cut(h, ":")
		k = strings.ToLower(k)
		if slices.Contains(transparencyIgnored, k) {
			continue
		}
		out = append(out, k+": "+strings.TrimSpace(v))
	}
	slices.SortStableFunc(out, func(a, b string) int {
		ka, _, _ := strings.Cut(a, ":")
		kb, _, _ := strings.Cut(b, ":")
		return strings.Compare(ka, kb)
	})
	return out
}

// sendRaw sends c to addr on a new connection, reads one response and,
// when c.closes is set, whether the server then closes the connection
// (nothing more arrives but EOF within 500 ms). The upstream's recorded
// requests for c are taken once the response is in.
func sendRaw(t *testing.T, addr string, c transparencyCase, up *rawUpstream) *transparencyOutcome {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	line, rest, _ := strings.Cut(c.raw, "\r\n")
	if _, err := io.WriteString(conn, line+"\r\nX-Case: "+c.name+"\r\n"+rest); err != nil {
		t.Fatal(err)
	}
	out := &transparencyOutcome{header: http.Header{}}
	br := bufio.NewReader(conn)
	method, _, _ := strings.Cut(line, " ")
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	for err == nil && resp.StatusCode == http.StatusContinue {
		resp, err = http.ReadResponse(br, &http.Request{Method: method})
	}
	if err == nil {
		out.status, out.header = resp.StatusCode, resp.Header
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if c.closes {
			_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			var b [1]byte
			_, rerr := br.Read(b[:])
			out.closed = rerr == io.EOF
		}
	}
	// The upstream records before it answers; nginx's and rlproxy's
	// response arrives after it.
	out.reqs = up.take(c.name)
	return out
}
