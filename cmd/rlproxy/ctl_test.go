package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/control"
	"rlproxy/internal/testutil/rlproxytest"
)

// ctlYAML: api keyed by an API key, then the address; the upstream is %q.
const ctlYAML = `upstreams: { app: { url: %q } }
admin: { token_file: tokens, audit_log: audit.log }
policies:
  api: { algorithm: token_bucket, rate: 1r/m, burst: 2, key: [header:X-API-Key, ip] }
routes: [ { name: all, upstream: app, policies: [api] } ]
`

const (
	ctlWriteToken = "ops-0123456789abcdef"
	ctlReadToken  = "viewer-0123456789abcdef"
)

// ctlServer runs a real rlproxy (its admin listener on loopback) with
// ctlYAML and a token file beside it; it returns the instance, the token
// file (whose lines `rlproxy ctl -token-file` reads as well) and the
// audit log's path.
func ctlServer(t *testing.T) (in *rlproxytest.Instance, tokenFile, auditLog string) {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("ops:"+ctlWriteToken+":write\nviewer:"+ctlReadToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	up := rlproxytest.NewUpstream(t)
	cfg := filepath.Join(dir, "rlproxy.yaml")
	yaml := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n" + fmt.Sprintf(ctlYAML, up.URL)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return rlproxytest.Start(t, "", rlproxytest.FromFile(cfg)), tokens, filepath.Join(dir, "audit.log")
}

// status is the status of GET / on in from ip, with the API key key ("" none).
func status(t *testing.T, in *rlproxytest.Instance, ip, key string) int {
	t.Helper()
	var hdr []string
	if key != "" {
		hdr = append(hdr, "X-API-Key", key)
	}
	resp, _ := rlproxytest.Get(t, rlproxytest.ClientFrom(ip), in.URL+"/", hdr...)
	return resp.StatusCode
}

// TestCtlRoundTrip: every verb of `rlproxy ctl` against a real instance,
// with what it prints, the instance's decisions under the entries (an
// address ban holds against an API key; exempt and override lift the
// limit), what the API then holds, the refusals it reports, and an audit
// that names the token and never a raw key.
func TestCtlRoundTrip(t *testing.T) {
	in, tokens, audit := ctlServer(t)
	url := in.AdminURL
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
	ban := mustCtl("ban", "-token-file", tokens, "-policy", "api", "-source", "ip", "-key", "127.0.0.7", "-for", "1h", "-reason", "scraping")
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
	// The instance decides under them: burst 2 at 1 r/m is two requests.
	for _, c := range []struct {
		name, ip, key string
		want          []int
	}{
		{"banned address", "127.0.0.7", "", []int{429}},
		{"banned address with an API key", "127.0.0.7", "k-other", []int{429}},
		{"exempt key", "127.0.0.8", "k-exempt-secret", []int{200, 200, 200, 200}},
		{"overridden key (burst 50)", "127.0.0.9", "k-override-secret", []int{200, 200, 200, 200}},
		{"plain key", "127.0.0.10", "k-plain", []int{200, 200, 429}},
	} {
		var got []int
		for range c.want {
			got = append(got, status(t, in, c.ip, c.key))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}

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
	if got := status(t, in, "127.0.0.7", ""); got != 200 {
		t.Errorf("the address after its ban was deleted: %d, want 200", got)
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
	for _, raw := range []string{"127.0.0.7", "k-exempt-secret", "k-override-secret"} {
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

// TestCtlOverTLS: with admin.tls an instance's admin listener off
// loopback takes a token over HTTPS; `rlproxy ctl -ca-file` trusts its
// certificate, and the same call over plain HTTP would be refused.
func TestCtlOverTLS(t *testing.T) {
	ip := ""
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && ip == "" {
			ip = n.IP.String()
		}
	}
	if ip == "" {
		t.Skip("no non-loopback IPv4 address")
	}
	dir := t.TempDir()
	certPEM, keyPEM := ctlCert(t, ip)
	for name, b := range map[string][]byte{"cert.pem": certPEM, "key.pem": keyPEM, "tokens": []byte("ops:" + ctlWriteToken + ":write\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	up := rlproxytest.NewUpstream(t)
	cfg := filepath.Join(dir, "rlproxy.yaml")
	yaml := "listen: 127.0.0.1:0\nadmin_listen: 0.0.0.0:0\n" + strings.Replace(fmt.Sprintf(ctlYAML, up.URL),
		"admin: { token_file: tokens, audit_log: audit.log }", "admin: { token_file: tokens, tls: { cert_file: cert.pem, key_file: key.pem } }", 1)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	in := rlproxytest.Start(t, "", rlproxytest.FromFile(cfg))
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(in.AdminURL, "http://"))
	admin := "https://" + net.JoinHostPort(ip, port)
	code, out, errOut := mainRun("ctl", "ban", "-admin", admin, "-ca-file", filepath.Join(dir, "cert.pem"), "-token-file", filepath.Join(dir, "tokens"),
		"-policy", "api", "-source", "ip", "-key", "127.0.0.7")
	if code != 0 || !strings.HasPrefix(out, "ban ") {
		t.Fatalf("ctl ban over TLS: exit %d %q %s", code, out, errOut)
	}
	if got := status(t, in, "127.0.0.7", ""); got != 429 {
		t.Errorf("banned address: %d, want 429", got)
	}
	code, _, errOut = mainRun("ctl", "list", "-admin", admin, "-token-file", filepath.Join(dir, "tokens"))
	if code != 1 || !strings.Contains(errOut, "certificate") {
		t.Errorf("ctl list without -ca-file: exit %d %s, want an untrusted certificate", code, errOut)
	}
}

// ctlCert is a self-signed certificate for ip and its key, PEM.
func ctlCert(t *testing.T, ip string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rlproxy admin"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP(ip)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

// TestCtlTokenNotSentInClear: ctl refuses to send its bearer token over
// plain http:// to an address other than loopback, before connecting:
// the admin listener would refuse it (credentials-need-tls), but only
// after the token crossed the network in clear.
func TestCtlTokenNotSentInClear(t *testing.T) {
	t.Setenv("RLPROXY_ADMIN_TOKEN", "0123456789abcdef0123")
	for admin, ok := range map[string]bool{
		"http://192.0.2.1:9090": false, "http://admin.example:9090": false, "http://[2001:db8::1]:9090": false,
		"http://127.0.0.1:9090": true, "http://127.9.0.1:9090": true, "http://[::1]:9090": true,
		"http://LOCALHOST:9090": true, "https://192.0.2.1:9090": true,
	} {
		fs := flag.NewFlagSet("ctl", flag.ContinueOnError)
		f := addCtlFlags(fs)
		if err := fs.Parse([]string{"-admin", admin}); err != nil {
			t.Fatal(err)
		}
		_, err := f.client()
		if (err == nil) != ok {
			t.Errorf("-admin %s: %v, want accepted %v", admin, err, ok)
		}
	}
}
