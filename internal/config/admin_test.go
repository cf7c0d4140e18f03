package config

import (
	"strings"
	"testing"
)

const adminBase = "upstreams: { app: { builtin: echo } }\nroutes: [ { name: r, upstream: app } ]\n"

// TestAdminSection decodes `admin:` and its defaults.
func TestAdminSection(t *testing.T) {
	c, err := ParseWith("x.yaml", []byte(adminBase), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Admin.ShowClientIPs || c.Admin.BasicAuth != nil {
		t.Errorf("defaults %+v; want hashed IPs, no basic auth", c.Admin)
	}
	t.Setenv("RLPROXY_TEST_ADMIN_PW", "correct horse battery")
	c, err = ParseWith("x.yaml", []byte(adminBase+"admin:\n  show_client_ips: true\n  basic_auth: { user: ops, password_env: RLPROXY_TEST_ADMIN_PW }\n"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Admin.ShowClientIPs || c.Admin.BasicAuth == nil || *c.Admin.BasicAuth != (BasicAuth{User: "ops", Password: "correct horse battery"}) {
		t.Errorf("admin %+v; want show_client_ips and ops's password", c.Admin)
	}
}

// TestAdminMistakes: each mistake is reported as FILE:LINE: field: message.
func TestAdminMistakes(t *testing.T) {
	t.Setenv("RLPROXY_TEST_ADMIN_SHORT", "short")
	t.Setenv("RLPROXY_TEST_ADMIN_PW", "correct horse battery")
	tests := []struct{ name, admin, want string }{
		{"unknown field", "admin:\n  show_client_ip: true", `x.yaml:4: admin.show_client_ip: unknown field "show_client_ip"; did you mean "show_client_ips"?`},
		{"not a bool", "admin:\n  show_client_ips: sometimes", `x.yaml:4: admin.show_client_ips: "sometimes": want true or false`},
		{"not a mapping", "admin: [1]", `x.yaml:3: admin: want a mapping of fields, not a list`},
		{"no user", "admin:\n  basic_auth: { password_env: RLPROXY_TEST_ADMIN_PW }", `x.yaml:4: admin.basic_auth.user: required: the user name the browser sends`},
		{"colon in user", "admin:\n  basic_auth: { user: \"a:b\", password_env: RLPROXY_TEST_ADMIN_PW }", `x.yaml:4: admin.basic_auth.user: "a:b": want 1 to 64 printable characters without a colon (RFC 7617)`},
		{"no password", "admin:\n  basic_auth:\n    user: ops", `x.yaml:4: admin.basic_auth.password_env: required: the environment variable holding the password`},
		{"unset password", "admin:\n  basic_auth:\n    user: ops\n    password_env: RLPROXY_TEST_ADMIN_UNSET", `x.yaml:6: admin.basic_auth.password_env: environment variable RLPROXY_TEST_ADMIN_UNSET is not set`},
		{"short password", "admin:\n  basic_auth:\n    user: ops\n    password_env: RLPROXY_TEST_ADMIN_SHORT", `x.yaml:6: admin.basic_auth.password_env: environment variable RLPROXY_TEST_ADMIN_SHORT holds 5 bytes; want at least 12`},
		{"password in file", "admin:\n  basic_auth: { user: ops, password: hunter2hunter2 }", `x.yaml:4: admin.basic_auth.password: unknown field "password"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWith("x.yaml", []byte(adminBase+tt.admin+"\n"), LoadOptions{})
			if err == nil {
				t.Fatalf("accepted; want %s", tt.want)
			}
			if got := strings.SplitN(err.Error(), "\n", 2)[0]; got != tt.want {
				t.Errorf("got  %s\nwant %s", err, tt.want)
			}
		})
	}
}
