package e2e

// The process log tells what happened, as JSON lines with log.format json:
// a client that left mid-response is one debug line named as such (never
// ReverseProxy's bare "i/o timeout"), an upgraded session is recorded as
// its 101 with its duration, and a store outage and the breaker's
// transitions are WARN lines.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/redisserver"
	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// logRecords decodes every line of the process log as a JSON object: a
// line that is not one (a library writing plain text) fails the test.
func logRecords(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("a log line that is not JSON: %q", l)
		}
		out = append(out, m)
	}
	return out
}

// withMsg returns the records whose msg is msg.
func withMsg(recs []map[string]any, msg string) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// TestClientLeftLogsOneDebugLine: a client that closes a streamed
// response is one debug line, "client left before the response was
// complete", with its route and the bytes it got; nothing else is logged
// about it, and no line says "timeout".
func TestClientLeftLogsOneDebugLine(t *testing.T) {
	t.Parallel()
	up := rlproxytest.NewUpstream(t)
	done := make(chan struct{})
	defer close(done)
	up.Handler = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		http.NewResponseController(w).Flush()
		select { // streams until rlproxy cuts the connection
		case <-r.Context().Done():
		case <-done:
		}
	}
	var log netutil.LockedBuffer
	in := rlproxytest.Start(t, fmt.Sprintf(`log: { level: debug, format: json }
upstreams: { app: { url: %q } }
routes: [{ name: events, upstream: app }]
`, up.URL), rlproxytest.WithLog(&log))
	conn, err := net.Dial("tcp", strings.TrimPrefix(in.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(conn, "GET /events HTTP/1.1\r\nHost: example\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "data: one\n" {
		t.Fatalf("first event %q (%v)", line, err)
	}
	conn.Close()
	const msg = "client left before the response was complete"
	waitfor.True(t, "the client-left line", func() bool { return strings.Contains(log.String(), msg) })
	// ReverseProxy writes its own line, if any, on the request's goroutine
	// before the deferred client-left line: it would be there by now.
	recs := logRecords(t, log.String())
	left := withMsg(recs, msg)
	if len(left) != 1 {
		t.Fatalf("%d client-left lines, want 1:\n%s", len(left), log.String())
	}
	if l := left[0]; l["level"] != "DEBUG" || l["route"] != "events" || l["status"] != float64(200) || l["path"] != "/events" {
		t.Errorf("client-left line %v, want level DEBUG, route events, status 200, path /events", l)
	}
	if strings.Contains(log.String(), "timeout") || strings.Contains(log.String(), "ReverseProxy") {
		t.Errorf("the log names a timeout or ReverseProxy:\n%s", log.String())
	}
}

// TestUpgradeRecordedAs101: a WebSocket session that ended normally is an
// access log line with status 101 and the session's duration, counted as
// 101 in rlproxy_http_requests_total and kept out of the request-duration
// histogram; no 499 anywhere.
func TestUpgradeRecordedAs101(t *testing.T) {
	t.Parallel()
	up := rlproxytest.NewUpstream(t)
	up.Handler = func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		_ = brw.Flush()
		_, _ = brw.ReadString('\n') // one message, then the session ends
	}
	logPath := filepath.Join(t.TempDir(), "access.log")
	in := rlproxytest.Start(t, fmt.Sprintf(`log: { access: { path: %q } }
upstreams: { app: { url: %q } }
routes: [{ name: ws, upstream: app }]
`, logPath, up.URL))
	conn, err := net.Dial("tcp", strings.TrimPrefix(in.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	const session = 300 * time.Millisecond
	time.Sleep(session) // the session's length, which the access log must show (no boundary near)
	_, _ = io.WriteString(conn, "bye\n")
	if _, err := br.ReadByte(); err != io.EOF { // the upstream ended the session
		t.Fatalf("after the session: %v, want EOF", err)
	}
	var lines []map[string]any
	waitfor.True(t, "the session's access log line", func() bool {
		lines = accessLinesIfAny(logPath)
		return len(lines) == 1
	})
	if l := lines[0]; l["status"] != float64(101) || l["upstream_status"] != float64(101) || l["duration_ms"].(float64) < float64(session.Milliseconds()) {
		t.Errorf("access log %v, want status 101, upstream_status 101, duration_ms ≥ %d", l, session.Milliseconds())
	}
	_, samples := opsScrape(t, in)
	if v := opsValue(t, samples, "rlproxy_http_requests_total", "route", "ws", "code", "101"); v != 1 {
		t.Errorf("rlproxy_http_requests_total{route=ws,code=101} = %v, want 1", v)
	}
	if v := opsValue(t, samples, "rlproxy_http_request_duration_seconds_count", "route", "ws"); v != 0 {
		t.Errorf("request-duration histogram count for ws = %v, want 0 (a session is no request latency)", v)
	}
	for _, s := range samples {
		if s.name == "rlproxy_http_requests_total" && s.labels["code"] == "499" {
			t.Errorf("a 499 was counted: %v", s)
		}
	}
}

// accessLinesIfAny parses the access log at path, or returns nil while it
// is missing or has a partial line.
func accessLinesIfAny(path string) []map[string]any {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 || b[len(b)-1] != '\n' {
		return nil
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil {
			return nil
		}
		out = append(out, m)
	}
	return out
}

// TestStoreOutageWarnings: Valkey going down and coming back, and the
// breaker opening and closing, are WARN lines in the JSON log, in that
// order.
func TestStoreOutageWarnings(t *testing.T) {
	t.Parallel()
	rs := redisserver.Start(t)
	up := rlproxytest.NewUpstream(t)
	var log netutil.LockedBuffer
	in := rlproxytest.Start(t, fmt.Sprintf(`log: { format: json }
store:
  type: valkey
  breaker: { failures: 2, cooldown: 200ms }
  valkey: { addrs: [%q], timeout: 500ms }
upstreams: { app: { url: %q } }
policies: { api: { algorithm: token_bucket, rate: 1000r/s, burst: 1000, key: ip } }
routes: [{ name: api, upstream: app, policies: [api] }]
`, rs.Addr, up.URL), rlproxytest.WithLog(&log))
	get := func() { rlproxytest.Get(t, nil, in.URL+"/x") }
	get()
	rs.Stop()
	const down, open = "store down: a round trip failed; each policy's on_store_error applies", "store node unreachable: circuit breaker open, its keys follow each policy's fail mode"
	waitfor.True(t, "the outage's WARN lines", func() bool {
		get()
		s := log.String()
		return strings.Contains(s, down) && strings.Contains(s, open)
	})
	rs.Restart()
	const upAgain, closed = "store up again: a round trip succeeded", "store node reachable again: circuit breaker closed"
	waitfor.True(t, "the recovery's WARN lines", func() bool {
		get()
		s := log.String()
		return strings.Contains(s, upAgain) && strings.Contains(s, closed)
	})
	recs := logRecords(t, log.String())
	var order []string
	for _, r := range recs {
		switch r["msg"] {
		case down, open, upAgain, closed:
			if r["level"] != "WARN" {
				t.Errorf("%q at level %v, want WARN", r["msg"], r["level"])
			}
			order = append(order, r["msg"].(string))
		}
	}
	want := []string{down, open, upAgain, closed}
	if strings.Join(order, "|") != strings.Join(want, "|") {
		t.Errorf("store lines in order:\n%s\nwant:\n%s", strings.Join(order, "\n"), strings.Join(want, "\n"))
	}
}

// TestRefusalLogHidesAddresses: the refusal log shows an IP-keyed client
// as the admin page does, "ip#" and 12 hex digits, the same hash in both,
// never the address.
func TestRefusalLogHidesAddresses(t *testing.T) {
	t.Parallel()
	up := rlproxytest.NewUpstream(t)
	var log netutil.LockedBuffer
	in := rlproxytest.Start(t, fmt.Sprintf(`log: { format: json }
upstreams: { app: { url: %q } }
policies: { api: { algorithm: token_bucket, rate: 1r/m, burst: 1, key: ip } }
routes: [{ name: api, upstream: app, policies: [api] }]
`, up.URL), rlproxytest.WithLog(&log))
	for _, want := range []int{200, 429} {
		if r, _ := rlproxytest.Get(t, nil, in.URL+"/x"); r.StatusCode != want {
			t.Fatalf("status %d, want %d", r.StatusCode, want)
		}
	}
	refused := withMsg(logRecords(t, log.String()), "request refused")
	if len(refused) != 1 {
		t.Fatalf("%d refusal lines, want 1:\n%s", len(refused), log.String())
	}
	key, _ := refused[0]["key"].(string)
	m := regexp.MustCompile(`^rl:v2:\{(ip#[0-9a-f]{12})\}:api:tb$`).FindStringSubmatch(key)
	if m == nil {
		t.Fatalf("refusal key %q, want rl:v2:{ip#<12 hex>}:api:tb", key)
	}
	_, body := rlproxytest.Get(t, nil, in.AdminURL+"/api/stats")
	var stats struct {
		Top []struct {
			Clients []struct{ ID string } `json:"clients"`
		} `json:"top"`
	}
	if err := json.Unmarshal([]byte(body), &stats); err != nil || len(stats.Top) != 1 || len(stats.Top[0].Clients) != 1 {
		t.Fatalf("/api/stats top refused: %v %s", err, body)
	}
	if got := stats.Top[0].Clients[0].ID; got != m[1] {
		t.Errorf("the admin page shows %q, the log %q: want one hash", got, m[1])
	}
}

// TestUpstreamFailureLinesCapped: a dead upstream under load writes at
// most logging.LibraryLinesPerSecond WARN lines a second, not one per
// request; each line is JSON and says suppressed=N.
func TestUpstreamFailureLinesCapped(t *testing.T) {
	t.Parallel()
	dead := netutil.FreeAddr(t) // nothing listens: every attempt is refused
	var log netutil.LockedBuffer
	in := rlproxytest.Start(t, fmt.Sprintf(`log: { format: json }
upstreams: { app: { url: "http://%s", retries: 0 } }
routes: [{ name: r, upstream: app }]
`, dead), rlproxytest.WithLog(&log))
	const n = 60
	start := time.Now()
	for range n {
		if r, _ := rlproxytest.Get(t, nil, in.URL+"/x"); r.StatusCode != http.StatusBadGateway {
			t.Fatalf("status %d, want 502", r.StatusCode)
		}
	}
	seconds := int(time.Now().Unix()-start.Unix()) + 1
	lines := withMsg(logRecords(t, log.String()), "upstream error")
	if len(lines) == 0 || len(lines) > 10*seconds || len(lines) >= n {
		t.Fatalf("%d upstream error lines for %d failures in %d second(s), want 1..%d", len(lines), n, seconds, 10*seconds)
	}
	for _, l := range lines {
		if l["level"] != "WARN" || l["suppressed"] == nil {
			t.Errorf("line %v: want level WARN with suppressed", l)
		}
	}
}
