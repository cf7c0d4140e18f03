package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// TestAccessLog: one JSON line per request with every field; request ids
// kept or generated, forwarded upstream and in problem+json; an API key in
// a header or the query never appears; the file is reopened on SIGUSR1.
func TestAccessLog(t *testing.T) {
	up := rlproxytest.NewUpstream(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "access.log")
	in := rlproxytest.Start(t, fmt.Sprintf(`log: { access: { path: %q } }
upstreams: { app: { url: %q } }
policies:
  byheader: { algorithm: sliding_log, limit: 2, window: 1h, key: header:X-API-Key }
  byquery: { algorithm: sliding_log, limit: 100, window: 1h, key: query:api_key }
routes:
  - { name: h, match: { path_prefix: /h }, upstream: app, policies: [byheader] }
  - { name: q, match: { path_prefix: /q }, upstream: app, policies: [byquery] }
`, logPath, up.URL))
	c := poolClient()
	send := func(path string, header ...string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, in.URL+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	const secret = "k3y-SECRET-value"
	send("/h/1", "X-API-Key", secret, "X-Request-Id", "req-given-1")
	send("/h/2", "X-API-Key", secret)
	refused, body := send("/h/3", "X-API-Key", secret) // 429
	var problem map[string]any
	_ = json.Unmarshal(body, &problem)
	send("/q/1?api_key="+secret+"&page=2", "Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	send("/nowhere")
	const requests = 5
	if refused.StatusCode != 429 || problem["requestId"] == nil || problem["requestId"] == "" {
		t.Errorf("429 %d with problem %v: want a requestId member", refused.StatusCode, problem)
	}
	seen := up.Requests()
	if len(seen) != 3 || seen[0].Header.Get("X-Request-Id") != "req-given-1" || len(seen[1].Header.Get("X-Request-Id")) != 32 ||
		seen[2].Header.Get("Traceparent") == "" {
		t.Errorf("ids forwarded upstream: %v", seen)
	}
	// Reopen: logrotate moves the file, then signals.
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, "the access log reopened", func() bool { _, err := os.Stat(logPath); return err == nil })
	send("/h/after-reopen", "X-API-Key", "another")
	in.App.Shutdown(t.Context()) // drains the log
	lines := accessLines(t, logPath+".1")
	after := accessLines(t, logPath)
	if len(lines) != requests || len(after) != 1 {
		t.Fatalf("%d lines before the reopen and %d after, want %d and 1", len(lines), len(after), requests)
	}
	want := []struct{ route, decision, id string }{{"h", "allowed", "req-given-1"}, {"h", "allowed", ""}, {"h", "rejected by byheader", ""},
		{"q", "allowed", "4bf92f3577b34da6a3ce929d0e0e4736"}, {"", "no-route", ""}}
	for i, m := range lines {
		for _, f := range []string{"time", "client", "peer", "method", "host", "path", "protocol", "status", "bytes", "duration_ms",
			"route", "decision", "upstream", "upstream_status", "upstream_ms", "retries", "request_id"} {
			if _, ok := m[f]; !ok {
				t.Errorf("line %d: no %q: %v", i, f, m)
			}
		}
		if m["route"] != want[i].route || m["decision"] != want[i].decision || want[i].id != "" && m["request_id"] != want[i].id ||
			m["request_id"] == "" {
			t.Errorf("line %d: route %v decision %v id %v, want %+v", i, m["route"], m["decision"], m["request_id"], want[i])
		}
	}
	if lines[3]["path"] != "/q/1?api_key=REDACTED&page=2" || lines[0]["upstream"] == "" || lines[0]["upstream_status"] != 200.0 {
		t.Errorf("line 3 path %v; line 0 upstream %v status %v", lines[3]["path"], lines[0]["upstream"], lines[0]["upstream_status"])
	}
	for _, p := range []string{logPath, logPath + ".1"} {
		data, _ := os.ReadFile(p)
		if strings.Contains(string(data), secret) {
			t.Errorf("%s shows the API key:\n%s", p, data)
		}
	}
	accessJQ(t, logPath+".1", requests)
}

// accessLines parses each line of an access log file as JSON.
func accessLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: line %q: %v", path, sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// accessJQ checks with jq, when installed, that the file is n JSON values.
func accessJQ(t *testing.T, path string, n int) {
	t.Helper()
	bin, err := exec.LookPath("jq")
	if err != nil {
		if os.Getenv("RLPROXY_REQUIRE_TOOLS") == "1" {
			t.Fatal("jq not installed (RLPROXY_REQUIRE_TOOLS=1)")
		}
		t.Log("jq not installed: check skipped")
		return
	}
	out, err := exec.Command(bin, "-c", ".status", path).CombinedOutput()
	if err != nil || strings.Count(string(out), "\n") != n {
		t.Errorf("jq -c .status %s: %v\n%s", path, err, out)
	}
}

// TestAccessLogNoLoss: 1,000 requests from 16 clients at once, below the
// buffer's bound: 1,000 lines, none dropped.
func TestAccessLogNoLoss(t *testing.T) {
	up := rlproxytest.NewUpstream(t)
	logPath := filepath.Join(t.TempDir(), "access.log")
	in := rlproxytest.Start(t, fmt.Sprintf(`log: { access: { path: %q, buffer: 2048 } }
upstreams: { app: { url: %q } }
routes: [{ name: r, upstream: app }]
`, logPath, up.URL))
	got := poolRun(t, in.URL+"/x", 1000, 16)
	if got["ok"] != 1000 {
		t.Fatalf("answers %v, want 1000 × ok", got)
	}
	_, samples := opsScrape(t, in)
	dropped := opsValue(t, samples, "rlproxy_access_log_dropped_total")
	in.App.Shutdown(t.Context())
	if lines := accessLines(t, logPath); len(lines) != 1000 || dropped != 0 {
		t.Errorf("%d lines, %v dropped; want 1000 and 0", len(lines), dropped)
	}
}
