package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/rlproxytest"
)

// TestEngineRefusedHead: on auto, a head the engine's parser refuses
// (obs-fold, a bare LF) is answered 400 problem+json naming the rule,
// counted in rlproxy_bad_requests_total under the rule's label, and the
// connection closes after it; the request pipelined behind it never
// reaches the upstream.
func TestEngineRefusedHead(t *testing.T) {
	up, in := startEngine(t, "auto")
	addr := strings.TrimPrefix(in.URL, "http://")
	for _, tc := range []struct{ raw, reason string }{
		{"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\nGET /next HTTP/1.1\r\nHost: h\r\n\r\n", "obs_fold"},
		{"GET / HTTP/1.1\r\nHost: h\nX: y\r\n\r\n", "bare_lf"},
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, tc.raw)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Type   string
			Status int
			Detail string
		}
		err = json.NewDecoder(resp.Body).Decode(&p)
		if err != nil || resp.StatusCode != 400 || !resp.Close || resp.Header.Get("Content-Type") != "application/problem+json" ||
			p.Type != "urn:rlproxy:problem:bad-request" || p.Status != 400 || !strings.Contains(p.Detail, "("+tc.reason+")") {
			t.Errorf("%s: %d close=%v %q %+v %v, want a 400 bad-request problem naming it, then the close",
				tc.reason, resp.StatusCode, resp.Close, resp.Header.Get("Content-Type"), p, err)
		}
		io.Copy(io.Discard, resp.Body)
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("%s: after the 400: %v, want EOF", tc.reason, err)
		}
	}
	if n := up.Count(); n != 0 {
		t.Errorf("upstream got %d requests, want none", n)
	}
	got := map[string]float64{}
	for _, m := range in.Metrics(t)["rlproxy_bad_requests_total"].GetMetric() {
		got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
	}
	if got["obs_fold"] != 1 || got["bare_lf"] != 1 {
		t.Errorf("rlproxy_bad_requests_total = %v, want obs_fold 1 and bare_lf 1", got)
	}
}

// TestEngineLongLine: the engine's only bound on a head is
// max_header_bytes, as net/http's: a 64 KiB credential line on a new
// connection (read by the engine) is served.
func TestEngineLongLine(t *testing.T) {
	up, in := startEngine(t, "auto")
	c, err := net.Dial("tcp", strings.TrimPrefix(in.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	key := strings.Repeat("K", 64<<10)
	io.WriteString(c, "GET /x HTTP/1.1\r\nHost: h\r\nX-API-Key: "+key+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a 64 KiB header line: %v %v, want 200", resp, err)
	}
	if r := up.Requests(); len(r) != 1 || r[0].Header.Get("X-API-Key") != key {
		t.Fatalf("upstream got %d requests, want the one with its 64 KiB key", len(r))
	}
}

// startEngine starts an instance on engine proxying every request to a
// new recording upstream.
func startEngine(t *testing.T, engine string) (*rlproxytest.Upstream, *rlproxytest.Instance) {
	up := rlproxytest.NewUpstream(t)
	return up, rlproxytest.Start(t, fmt.Sprintf(`
server: { engine: %s }
upstreams: { app: { url: %q } }
routes: [ { name: all, upstream: app } ]
`, engine, up.URL))
}

// answers sends raw on a new connection to addr and returns the status
// codes of the answers read until the connection closes.
func answers(t *testing.T, addr, raw string) []int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, raw)
	br := bufio.NewReader(c)
	var codes []int
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return codes
		}
		io.Copy(io.Discard, resp.Body)
		codes = append(codes, resp.StatusCode)
		if resp.Close {
			return codes
		}
	}
}

// paths lists the paths of the requests up received, in order.
func paths(up *rlproxytest.Upstream) []string {
	var out []string
	for _, r := range up.Requests() {
		out = append(out, r.URL.Path)
	}
	return out
}

// TestEngineHandedOverStaysStrict: once the engine hands a request over
// to net/http (here an absolute-form target), the requests net/http
// reads after it on that connection are held to the engine's parser. A
// repeated identical Content-Length, which net/http accepts and the
// engine refuses, is answered 400 and closes the connection: neither it
// nor the request behind its body reaches the upstream.
func TestEngineHandedOverStaysStrict(t *testing.T) {
	up, in := startEngine(t, "auto")
	addr := strings.TrimPrefix(in.URL, "http://")
	raw := "GET http://h/first HTTP/1.1\r\nHost: h\r\n\r\n" +
		"GET /second HTTP/1.1\r\nHost: h\r\n\r\n" +
		"POST /dup HTTP/1.1\r\nHost: h\r\nContent-Length: 27\r\nContent-Length: 27\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\n\r\n"
	if got := answers(t, addr, raw); fmt.Sprint(got) != "[200 200 400]" {
		t.Errorf("answers %v, want [200 200 400]", got)
	}
	if got := paths(up); fmt.Sprint(got) != "[/first /second]" {
		t.Errorf("upstream received %v, want [/first /second]", got)
	}
}

// TestStrayCRLF: empty lines before a request line are skipped, as nginx
// does (RFC 9112 §2.2), on both engines: the request after a body and
// its extra CRLF (as old clients send) is served, and so is one after
// several CRLFs on a new connection. A bare LF stays refused.
func TestStrayCRLF(t *testing.T) {
	for _, engine := range []string{"auto", "std"} {
		t.Run(engine, func(t *testing.T) {
			up, in := startEngine(t, engine)
			addr := strings.TrimPrefix(in.URL, "http://")
			raw := "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nok\r\n" +
				"GET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
			if got := answers(t, addr, raw); fmt.Sprint(got) != "[200 200]" {
				t.Errorf("after a body: answers %v, want [200 200]", got)
			}
			if got := answers(t, addr, "\r\n\r\n\r\nGET /c HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"); fmt.Sprint(got) != "[200]" {
				t.Errorf("leading CRLFs: answers %v, want [200]", got)
			}
			if got := answers(t, addr, "\nGET /d HTTP/1.1\r\nHost: h\r\n\r\n"); fmt.Sprint(got) != "[400]" {
				t.Errorf("leading bare LF: answers %v, want [400]", got)
			}
			if got := paths(up); fmt.Sprint(got) != "[/a /b /c]" {
				t.Errorf("upstream received %v, want [/a /b /c]", got)
			}
		})
	}
}
