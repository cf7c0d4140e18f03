package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestParseTokenFile: good lines, default scope, and each mistake at its
// line, never showing the token.
func TestParseTokenFile(t *testing.T) {
	toks, err := ParseTokenFile("t", "# ops\n\nalice:0123456789abcdef:write\nbob:fedcba9876543210\r\ncarol:aaaaaaaaaaaaaaaa:read\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []AdminToken{{"alice", "0123456789abcdef", true}, {"bob", "fedcba9876543210", false}, {"carol", "aaaaaaaaaaaaaaaa", false}}
	if !reflect.DeepEqual(toks, want) {
		t.Errorf("got %+v\nwant %+v", toks, want)
	}
	_, err = ParseTokenFile("t", "alice\nbob:short\ncarol:0123456789abcdef:admin\ndave:0123456789abcdef\ndave:1123456789abcdef\nerin:0123456789abcdef\n")
	got := err.Error()
	wantErr := strings.Join([]string{
		"t:1: want name:token or name:token:read|write",
		`t:2: token of "bob": want at least 16 printable ASCII bytes without spaces (the token is not shown)`,
		`t:3: scope "admin": want read or write`,
		`t:5: name "dave" repeats line 4`,
		`t:6: the token of "erin" repeats line 4's: each name needs its own`,
	}, "\n")
	if got != wantErr {
		t.Errorf("got\n%s\nwant\n%s", got, wantErr)
	}
	if strings.Contains(got, "0123456789abcdef") || strings.Contains(got, "short") {
		t.Errorf("an error shows a token: %s", got)
	}
}

// TestAdminControlFields: token_file, audit_log and hosts decode, resolve
// against the config's directory, and their mistakes name FILE:LINE.
func TestAdminControlFields(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokens"), []byte("ops:0123456789abcdef:write\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad-tokens"), []byte("# x\nops:tooshort\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "x.yaml")
	c, err := ParseWith(cfg, []byte(adminBase+"admin: { token_file: tokens, audit_log: audit.log, hosts: [Admin.Example.com, rlproxy-admin] }\n"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := c.Admin
	if a.TokenFile != filepath.Join(dir, "tokens") || a.AuditLog != filepath.Join(dir, "audit.log") || !reflect.DeepEqual(a.Hosts, []string{"admin.example.com", "rlproxy-admin"}) {
		t.Errorf("admin %+v", a)
	}
	tests := []struct{ admin, want string }{
		{"admin: { token_file: bad-tokens }", filepath.Join(dir, "bad-tokens") + `:2: admin.token_file: token of "ops": want at least 16 printable ASCII bytes without spaces (the token is not shown)`},
		{"admin: { token_file: missing }", cfg + `:3: admin.token_file: "missing": no such file or directory`},
		{"admin: { audit_log: nodir/audit.log }", cfg + `:3: admin.audit_log: "nodir/audit.log": directory ` + filepath.Join(dir, "nodir") + ` does not exist`},
		{"admin: { hosts: [\"a:9090\"] }", cfg + `:3: admin.hosts[0]: "a:9090": want a DNS host name, without a port`},
		{"admin: { tls: { cert_file: tokens } }", cfg + `:3: admin.tls.key_file: required: a PEM file`},
		{"admin: { tls: { cert_file: tokens, key_file: tokens } }", cfg + `:3: admin.tls: loading certificate and key: tls: failed to find any PEM data in certificate input`},
		{"admin: { hosts: [a.b, A.B] }", cfg + `:3: admin.hosts[1]: "A.B": listed twice`},
	}
	for _, tt := range tests {
		_, err := ParseWith(cfg, []byte(adminBase+tt.admin+"\n"), LoadOptions{})
		if err == nil {
			t.Errorf("%s: accepted", tt.admin)
			continue
		}
		if got := strings.SplitN(err.Error(), "\n", 2)[0]; got != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
	}
}
