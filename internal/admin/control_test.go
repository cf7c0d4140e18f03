package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rlproxy/internal/config"
	"rlproxy/internal/control"
	"rlproxy/internal/metrics"
	"rlproxy/internal/proxy"
)

// entries is a Controller over a map, in id order of creation: what the
// access rules guard (the entries' own behaviour is package control's).
type entries struct {
	mu  sync.Mutex
	ids []string
	m   map[string]control.Entry
}

func (c *entries) Ensure(_ context.Context, r control.Request, by string) (control.Entry, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Action != "ban" && r.Action != "exempt" && r.Action != "override" {
		return control.Entry{}, false, &control.Error{Kind: control.KindInvalid, Msg: "action " + r.Action}
	}
	id := fmt.Sprintf("e%d", len(c.ids)+1)
	e := control.Entry{ID: id, Policy: r.Policy, Source: "ip", Client: "ip#0123456789ab", Action: r.Action, Reason: r.Reason, By: by, Created: time.Unix(1e9, 0).UTC()}
	c.ids = append(c.ids, id)
	c.m[id] = e
	return e, true, nil
}

func (c *entries) Delete(_ context.Context, id, _ string) (control.Entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok {
		return control.Entry{}, &control.Error{Kind: control.KindNotFound, Msg: "no entry " + id}
	}
	delete(c.m, id)
	return e, nil
}

func (c *entries) Get(_ context.Context, id string) (control.Entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[id]; ok {
		return e, nil
	}
	return control.Entry{}, &control.Error{Kind: control.KindNotFound, Msg: "no entry " + id}
}

func (c *entries) List(_ context.Context, policy, cursor string, limit int) ([]control.Entry, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []control.Entry
	for _, id := range c.ids {
		if e, ok := c.m[id]; ok && id > cursor && (policy == "" || e.Policy == policy) {
			if len(out) == limit {
				return out, out[len(out)-1].ID, nil
			}
			out = append(out, e)
		}
	}
	return out, "", nil
}

const (
	aliceToken = "alice-0123456789abcdef"
	bobToken   = "bob-0123456789abcdefgh"
)

// controlServer starts an admin server with the control API on addr and
// admin as the configuration's admin section (token_file: tokens in dir).
func controlServer(t *testing.T, addr string, admin config.Admin) (*Server, *metrics.Metrics, string) {
	t.Helper()
	dir := t.TempDir()
	admin.TokenFile = filepath.Join(dir, "tokens")
	admin.AuditLog = filepath.Join(dir, "audit.log")
	writeTokens(t, admin.TokenFile, "alice:"+aliceToken+":write\nbob:"+bobToken+"\n")
	rt := &proxy.Runtime{Config: &config.Config{Admin: admin}}
	m := metrics.New(prometheus.NewRegistry(), "test")
	src := ControlSource{Entries: &entries{m: map[string]control.Entry{}}, Runtime: func() *proxy.Runtime { return rt }, Changed: m.ControlChange}
	s := New(addr, m, func() bool { return true }, WithControl(src))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s, m, dir
}

// writeTokens replaces the token file by rename, as an editor saves it.
func writeTokens(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path+".new", []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// call is one request to the control API; hdr are header lines "K: V"
// (Host: sets the Host).
func call(t *testing.T, method, url, body string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ": ")
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

const banBody = `{"policy":"api","source":"ip","key":"203.0.113.7","action":"ban","expires_in":"1h","reason":"scraping"}`

// TestControlAccess: every refusal of the control API over real HTTP on
// a loopback listener, with its status and problem type, then the
// accepted calls.
func TestControlAccess(t *testing.T) {
	t.Setenv("RLPROXY_TEST_ADMIN_PW", "correct horse battery")
	s, m, dir := controlServer(t, "127.0.0.1:0", config.Admin{BasicAuth: &config.BasicAuth{User: "ops", Password: "correct horse battery"}, Hosts: []string{"admin.example.com"}})
	base := "http://" + s.Addr() + "/api/entries"
	json := "Content-Type: application/json"
	alice, bob := "Authorization: Bearer "+aliceToken, "Authorization: Bearer "+bobToken
	steps := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		kind                     string // problem type's last part; "" for a success
		want                     string // in the body of a success
	}{
		{"change without credentials", "POST", "", banBody, []string{json}, 401, "unauthorized", ""},
		{"delete without credentials", "DELETE", "/e1", "", []string{json}, 401, "unauthorized", ""},
		{"wrong token", "POST", "", banBody, []string{json, "Authorization: Bearer not-a-token-of-the-file"}, 401, "unauthorized", ""},
		{"wrong password", "POST", "", banBody, []string{json, "Authorization: Basic b3BzOndyb25n"}, 401, "unauthorized", ""},
		{"read-scope token", "POST", "", banBody, []string{json, bob}, 403, "read-only", ""},
		{"delete with read-scope token", "DELETE", "/e1", "", []string{json, bob}, 403, "read-only", ""},
		{"not JSON (a form)", "POST", "", banBody, []string{"Content-Type: application/x-www-form-urlencoded", alice}, 415, "json-required", ""},
		{"no content type", "POST", "", banBody, []string{alice}, 415, "json-required", ""},
		{"foreign Origin", "POST", "", banBody, []string{json, alice, "Origin: http://evil.example"}, 403, "cross-origin", ""},
		{"cross-site fetch", "POST", "", banBody, []string{json, alice, "Sec-Fetch-Site: cross-site"}, 403, "cross-origin", ""},
		{"rebound Host", "POST", "", banBody, []string{json, alice, "Host: evil.example:80"}, 421, "unknown-host", ""},
		{"rebound Host on a read", "GET", "", "", []string{bob, "Host: evil.example"}, 421, "unknown-host", ""},
		{"read without credentials (basic_auth set)", "GET", "", "", nil, 401, "unauthorized", ""},
		{"unknown field", "POST", "", `{"policy":"api","key":"k","action":"ban","bogus":1}`, []string{json, alice}, 400, "invalid-entry", ""},
		{"two values", "POST", "", banBody + banBody, []string{json, alice}, 400, "invalid-entry", ""},
		{"refused by the controller", "POST", "", `{"policy":"api","key":"k","action":"smite"}`, []string{json, alice}, 400, "invalid-entry", ""},
		{"ban by token", "POST", "", banBody, []string{json, alice, "Origin: http://" + s.Addr()}, 201, "", ""},
		{"ban by basic_auth, configured Host", "POST", "", banBody, []string{"Content-Type: application/json; charset=utf-8", "Authorization: Basic b3BzOmNvcnJlY3QgaG9yc2UgYmF0dGVyeQ==", "Host: Admin.Example.com:9090"}, 201, "", ""},
		{"list with a read token", "GET", "?policy=api&limit=1", "", []string{bob}, 200, "", `{"entries":[{"id":"e1",`},
		{"next page", "GET", "?policy=api&limit=1&cursor=e1", "", []string{bob}, 200, "", `"next":""}`},
		{"bad limit", "GET", "?limit=0", "", []string{bob}, 400, "invalid-entry", ""},
		{"get", "GET", "/e2", "", []string{bob, "Host: localhost"}, 200, "", `"by":"ops"`},
		{"delete with a body, not JSON", "DELETE", "/e1", "{}", []string{alice}, 415, "json-required", ""},
		{"delete without a body or a content type", "DELETE", "/e1", "", []string{alice}, 200, "", `"id":"e1"`},
		{"delete again", "DELETE", "/e1", "", []string{json, alice}, 404, "entry-not-found", ""},
	}
	for _, st := range steps {
		status, body, h := call(t, st.method, base+st.path, st.body, st.hdr...)
		if status != st.status {
			t.Errorf("%s: %d %s, want %d", st.name, status, body, st.status)
			continue
		}
		if st.kind != "" && (h.Get("Content-Type") != "application/problem+json" || !strings.Contains(body, `"type":"urn:rlproxy:problem:`+st.kind+`"`)) {
			t.Errorf("%s: %s %s, want problem type %s", st.name, h.Get("Content-Type"), body, st.kind)
		}
		if !strings.Contains(body, st.want) {
			t.Errorf("%s: %s, want %s in it", st.name, body, st.want)
		}
		if status == 401 && len(h.Values("WWW-Authenticate")) != 2 {
			t.Errorf("%s: challenges %q, want Bearer and Basic", st.name, h.Values("WWW-Authenticate"))
		}
	}
	checkAudit(t, filepath.Join(dir, "audit.log"), m)
}

// checkAudit: the three changes of TestControlAccess, one JSON line each,
// naming who made them, never the raw key, in a 0600 file; the metric
// counts them by action.
func checkAudit(t *testing.T, path string, m *metrics.Metrics) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("audit log mode %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	if bytes.Contains(b, []byte("203.0.113.7")) {
		t.Errorf("the audit shows the raw key:\n%s", b)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	want := []struct{ who, action, id string }{{"alice", "ban", "e1"}, {"ops", "ban", "e2"}, {"alice", "delete", "e1"}}
	if len(lines) != len(want) {
		t.Fatalf("audit has %d lines, want %d:\n%s", len(lines), len(want), b)
	}
	for i, w := range want {
		var l auditLine
		if err := json.Unmarshal([]byte(lines[i]), &l); err != nil {
			t.Fatal(err)
		}
		if l.Who != w.who || l.Action != w.action || l.ID != w.id || l.Reason != "scraping" || l.Policy != "api" || (l.Before == nil) != (w.action == "ban") || (l.After == nil) != (w.action == "delete") {
			t.Errorf("audit line %d: %s; want %+v", i+1, lines[i], w)
		}
	}
	rec := httpRecorder(m)
	for _, w := range []string{`rlproxy_control_changes_total{action="ban"} 2`, `rlproxy_control_changes_total{action="delete"} 1`, `rlproxy_control_changes_total{action="exempt"} 0`} {
		if !strings.Contains(rec, w) {
			t.Errorf("metrics lack %s", w)
		}
	}
}

// httpRecorder is m's exposition text.
func httpRecorder(m *metrics.Metrics) string {
	srv := &http.Server{Handler: m.Handler()}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(ln)
	defer srv.Close()
	resp, err := http.Get("http://" + ln.Addr().String())
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestControlTokenReread: a token added, revoked or re-scoped in the
// token file applies to the very next request; a file that no longer
// parses refuses every token.
func TestControlTokenReread(t *testing.T) {
	s, _, dir := controlServer(t, "127.0.0.1:0", config.Admin{})
	base := "http://" + s.Addr() + "/api/entries"
	path := filepath.Join(dir, "tokens")
	post := func(tok string) int {
		status, _, _ := call(t, "POST", base, banBody, "Content-Type: application/json", "Authorization: Bearer "+tok)
		return status
	}
	if got := post(aliceToken); got != 201 {
		t.Fatalf("alice before: %d", got)
	}
	writeTokens(t, path, "carol:carol-0123456789abcdef:write\nalice:"+aliceToken+":read\n")
	if a, c := post(aliceToken), post("carol-0123456789abcdef"); a != 403 || c != 201 {
		t.Errorf("after re-scoping alice and adding carol: alice %d carol %d, want 403 201", a, c)
	}
	writeTokens(t, path, "carol:short\n")
	if c := post("carol-0123456789abcdef"); c != 401 {
		t.Errorf("with a broken file: carol %d, want 401", c)
	}
	// Reads follow the page's rule: open on a loopback listener without basic_auth.
	if status, _, _ := call(t, "GET", base, ""); status != 200 {
		t.Errorf("loopback read without credentials: %d, want 200", status)
	}
}

// TestControlTokenNeedsTLS: on a listener that is not loopback and has
// no TLS, a token is refused (also for reading) and so is any change,
// before any credential is checked; the same listener reached over
// loopback accepts them.
func TestControlTokenNeedsTLS(t *testing.T) {
	ip := nonLoopbackIPv4(t)
	s, _, _ := controlServer(t, "0.0.0.0:0", config.Admin{})
	_, port, _ := net.SplitHostPort(s.Addr())
	remote := "http://" + net.JoinHostPort(ip, port) + "/api/entries"
	for _, st := range []struct {
		method, tok string
		status      int
	}{{"GET", bobToken, 403}, {"POST", aliceToken, 403}, {"POST", "wrong-token-wrong-token", 403}, {"GET", "", 401}} {
		hdr := []string{"Content-Type: application/json"}
		if st.tok != "" {
			hdr = append(hdr, "Authorization: Bearer "+st.tok)
		}
		status, body, _ := call(t, st.method, remote, banBody, hdr...)
		if status != st.status || (status == 403 && !strings.Contains(body, "credentials-need-tls")) {
			t.Errorf("%s with token %q over %s: %d %s, want %d", st.method, st.tok, ip, status, body, st.status)
		}
	}
	local := "http://127.0.0.1:" + port + "/api/entries"
	if status, body, _ := call(t, "POST", local, banBody, "Content-Type: application/json", "Authorization: Bearer "+aliceToken); status != 201 {
		t.Errorf("over loopback: %d %s, want 201", status, body)
	}
}

// nonLoopbackIPv4 is an address of this host off the loopback interface,
// or skips the test.
func nonLoopbackIPv4(t *testing.T) string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address")
	return ""
}

// TestHostAllowed: the names the page and the control API answer to.
func TestHostAllowed(t *testing.T) {
	s := &Server{addr: "Admin.Internal:9090"}
	hosts := []string{"ops.example.com"}
	for host, want := range map[string]bool{
		"localhost:9090": true, "LOCALHOST.": true, "127.0.0.1:9090": true, "[::1]:9090": true, "192.0.2.2:9090": true, "[::]:9090": true,
		"admin.internal:9090": true, "ops.example.com": true, "Ops.Example.Com:443": true,
		"evil.example": false, "localhost.evil.example:9090": false, "": false, "127.0.0.1.nip.io": false,
	} {
		r := &http.Request{Host: host}
		if got := s.hostAllowed(r, hosts); got != want {
			t.Errorf("Host %q: %v, want %v", host, got, want)
		}
	}
}

// TestAuditUnwritable: a line the audit log cannot take goes to the
// process log with the error, whole.
func TestAuditUnwritable(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var a audit
	a.write(log, filepath.Join(t.TempDir(), "gone", "audit.log"), &auditLine{Who: "alice", Action: "delete", ID: "e1"})
	out := buf.String()
	if !strings.Contains(out, `msg="admin.audit_log not written; the line follows"`) || !strings.Contains(out, `\"who\":\"alice\",\"action\":\"delete\",\"id\":\"e1\"`) ||
		!strings.Contains(out, "no such file or directory") {
		t.Errorf("process log: %s", out)
	}
}
