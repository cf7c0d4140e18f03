package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"rlproxy/internal/admin"
	"rlproxy/internal/config"
	"rlproxy/internal/control"
	"rlproxy/internal/metrics"
	"rlproxy/internal/proxy"
)

// ctlYAML: api keyed by an API key, then the address.
const ctlYAML = `upstreams: { app: { url: "http://127.0.0.1:1" } }
policies:
  api: { algorithm: token_bucket, rate: 10r/s, burst: 5, key: [header:X-API-Key, ip] }
routes: [ { name: all, upstream: app, policies: [api] } ]
`

const (
	ctlWriteToken = "ops-0123456789abcdef"
	ctlReadToken  = "viewer-0123456789abcdef"
)

// ctlServer runs an admin listener with the control API over a real
// control.Controller configured with ctlYAML; it returns the admin URL,
// the write token's file (a line of the token file itself) and the
// audit log's path.
func ctlServer(t *testing.T) (url, tokenFile, auditLog string) {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("ops:"+ctlWriteToken+":write\nviewer:"+ctlReadToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseWith(filepath.Join(dir, "rlproxy.yaml"), []byte(ctlYAML+"admin: { token_file: tokens, audit_log: audit.log }\n"), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := control.New(control.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.Configure(cfg)
	rt := &proxy.Runtime{Config: cfg}
	m := metrics.New(prometheus.NewRegistry(), "test")
	s := admin.New("127.0.0.1:0", m, func() bool { return true },
		admin.WithControl(admin.ControlSource{Entries: c, Runtime: func() *proxy.Runtime { return rt }, Changed: m.ControlChange}))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return "http://" + s.Addr(), tokens, cfg.Admin.AuditLog
}

// TestCtlRoundTrip: every verb of `rlproxy ctl` against a control API,
// with what it prints, what the API then holds, the refusals it reports,
// and an audit that names the token and never a raw key.
func TestCtlRoundTrip(t *testing.T) {
	url, tokens, audit := ctlServer(t)
	ctl := func(args ...string) (int, string, string) {
		return mainRun(append([]string{"ctl", args[0], "-admin", url}, args[1:]...)...)
	}
	mustCtl := func(args ...string) string {
		t.Helper()
		code, out, errOut := ctl(args...)
		if code != 0 {
			t.Fatalf("ctl %q: exit %d: %s", args, code, errOut)
		}
		return out
	}
	id := regexp.MustCompile(`^(ban|exempt|override) (\S+): `)
	idOf := func(out string) string {
		t.Helper()
		m := id.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no id in %q", out)
		}
		return m[2]
	}
	ban := mustCtl("ban", "-token-file", tokens, "-policy", "api", "-source", "ip", "-key", "203.0.113.7", "-for", "1h", "-reason", "scraping")
	if !regexp.MustCompile(`^ban \S+: ban of ip#[0-9a-f]{12} on policy api, expires \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n$`).MatchString(ban) {
		t.Errorf("ban printed %q", ban)
	}
	t.Setenv("RLPROXY_ADMIN_TOKEN", ctlWriteToken)
	exempt := mustCtl("exempt", "-policy", "api", "-key", "k-exempt-secret", "-reason", "partner")
	if !regexp.MustCompile(`^exempt \S+: exempt of h:[0-9a-f]{12} on policy api, never expires\n$`).MatchString(exempt) {
		t.Errorf("exempt printed %q", exempt)
	}
	over := mustCtl("override", "-policy", "api", "-key", "k-override-secret", "-rate", "100r/s", "-burst", "50")
	ids := []string{idOf(ban), idOf(exempt), idOf(over)}

	var listed []control.Entry
	if err := json.Unmarshal([]byte(mustCtl("list", "-policy", "api", "-json", "-limit", "1")), &listed); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range listed {
		got[e.ID] = e.Action + " " + e.Reason
		if e.Action == "override" && (e.Rate != "100r/s" || e.Burst == nil || *e.Burst != 50) {
			t.Errorf("override listed as %+v", e)
		}
	}
	want := map[string]string{ids[0]: "ban scraping", ids[1]: "exempt partner", ids[2]: "override "}
	if len(listed) != 3 || got[ids[0]] != want[ids[0]] || got[ids[1]] != want[ids[1]] || got[ids[2]] != want[ids[2]] {
		t.Errorf("list -limit 1 (three pages): %v, want %v", got, want)
	}
	if out := mustCtl("delete", ids[0]); out != "deleted "+ids[0]+" (ban of "+listed[indexOf(listed, ids[0])].Client+" on policy api)\n" {
		t.Errorf("delete printed %q", out)
	}
	table := mustCtl("list")
	if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "ID ") || strings.Contains(table, ids[0]) {
		t.Errorf("list after delete:\n%s", table)
	}

	t.Setenv("RLPROXY_ADMIN_TOKEN", "")
	refusals := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"ban", "-policy", "api", "-key", "x"}, 1, "401 credentials required"},
		{[]string{"ban", "-token-file", writeFile(t, ctlReadToken+"\n"), "-policy", "api", "-key", "x"}, 1, `403 token "viewer" has the read scope`},
		{[]string{"ban", "-token-file", tokens, "-policy", "nope", "-key", "x"}, 1, "400"},
		{[]string{"delete", "-token-file", tokens, ids[0]}, 1, "404"},
		{[]string{"smite"}, 2, `unknown verb "smite"`},
		{[]string{"delete"}, 2, "want 1 argument(s)"},
	}
	for _, r := range refusals {
		code, _, errOut := ctl(r.args...)
		if r.args[0] == "smite" {
			code, _, errOut = mainRun("ctl", "smite")
		}
		if code != r.code || !strings.Contains(errOut, r.want) {
			t.Errorf("ctl %q: exit %d %q, want %d and %q", r.args, code, errOut, r.code, r.want)
		}
	}

	b, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{"203.0.113.7", "k-exempt-secret", "k-override-secret"} {
		if strings.Contains(string(b), raw) {
			t.Errorf("the audit log shows %q:\n%s", raw, b)
		}
	}
	if n := strings.Count(string(b), `"who":"ops"`); n != 4 {
		t.Errorf("audit lines by ops: %d, want 4 (three sets, one delete):\n%s", n, b)
	}
}

func indexOf(es []control.Entry, id string) int {
	for i, e := range es {
		if e.ID == id {
			return i
		}
	}
	return 0
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
