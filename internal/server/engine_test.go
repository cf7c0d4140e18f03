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
	up := rlproxytest.NewUpstream(t)
	in := rlproxytest.Start(t, fmt.Sprintf(`
server: { engine: auto }
upstreams: { app: { url: %q } }
routes: [ { name: all, upstream: app } ]
`, up.URL))
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
