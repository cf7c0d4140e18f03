package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// mainWrite writes a config file into a temp dir and returns its path.
func mainWrite(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// mainRun runs the CLI in-process and returns exit code, stdout, stderr.
func mainRun(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestValidateReportsFileLine: `rlproxy validate` prints one
// FILE:LINE: field: message line per problem (all of them, in file order),
// then the nginx -t style verdict, and exits non-zero.
func TestValidateReportsFileLine(t *testing.T) {
	cases := []struct {
		name, body string
		want       []string // lines with FILE standing for the path
	}{
		{
			name: "misspelled.yaml",
			body: `upstreams:
  app: { url: "http://127.0.0.1:9000" }
policies:
  login:
    algorithm: leaky_bucket
    rate: 30r/m
    burts: 5
routes:
  - { name: login, upstream: app, policies: [login] }
`,
			want: []string{`FILE:7: policies.login.burts: unknown field "burts"; did you mean "burst"?`},
		},
		{
			name: "rate.yaml",
			body: `upstreams:
  app: { url: "http://127.0.0.1:9000" }
policies:
  api:
    algorithm: token_bucket
    rate: 10/s
    burst: 20
routes:
  - { name: api, upstream: app, policies: [api] }
`,
			want: []string{`FILE:6: policies.api.rate: "10/s": want N r/s, N r/m, N r/h or N r/d`},
		},
		{
			name: "both.yaml",
			body: `upstreams:
  app: { url: "http://127.0.0.1:9000" }
policies:
  api:
    algorithm: token_bucket
    rate: 10/s
    burst: 20
  login:
    algorithm: leaky_bucket
    rate: 30r/m
    burts: 5
routes:
  - { name: api, upstream: app, policies: [api, login] }
`,
			want: []string{
				`FILE:6: policies.api.rate: "10/s": want N r/s, N r/m, N r/h or N r/d`,
				`FILE:11: policies.login.burts: unknown field "burts"; did you mean "burst"?`,
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := mainWrite(t, c.name, c.body)
			code, stdout, stderr := mainRun("validate", "-config", path)
			if code == 0 {
				t.Fatalf("exit 0 for a bad file; stdout %q", stdout)
			}
			want := strings.ReplaceAll(strings.Join(c.want, "\n"), "FILE", path) +
				"\nrlproxy: configuration file " + path + " test failed\n"
			if stderr != want {
				t.Errorf("stderr:\n%s\nwant:\n%s", stderr, want)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
		})
	}
}

// TestValidateShippedConfig: the example configuration is valid.
func TestValidateShippedConfig(t *testing.T) {
	path := filepath.Join("..", "..", "configs", "rlproxy.yaml")
	code, stdout, stderr := mainRun("validate", "-config", path)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if want := "rlproxy: configuration file " + path + " test is successful\n"; stdout != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
}

// TestVersion prints "rlproxy dev" (the unset build version), the commit and
// build date (unknown in a test binary, which has no VCS stamp) and the Go
// version.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version", "-version"} {
		code, stdout, _ := mainRun(arg)
		if want := "rlproxy dev (commit unknown, built unknown, " + runtime.Version() + ")\n"; code != 0 || stdout != want {
			t.Errorf("rlproxy %s: exit %d, stdout %q, want 0 and %q", arg, code, stdout, want)
		}
	}
}

// TestServeBadConfig: serving a bad file exits 1 at once with its problems
// (file:line), and a missing file likewise names the file.
func TestServeBadConfig(t *testing.T) {
	path := mainWrite(t, "bad.yaml", `upstreams:
  app: { url: "http://127.0.0.1:9000" }
policies:
  api: { algorithm: token_bucket, rate: 10/s, burst: 20 }
routes:
  - { name: api, upstream: app, policies: [api] }
`)
	for _, args := range [][]string{{"-config", path}, {"serve", "-config", path}} {
		code, _, stderr := mainRun(args...)
		want := "rlproxy: loading " + path + ":\n" + path + `:4: policies.api.rate: "10/s": want N r/s, N r/m, N r/h or N r/d` + "\n"
		if code != 1 || stderr != want {
			t.Errorf("%q: exit %d, stderr:\n%s\nwant exit 1 and:\n%s", args, code, stderr, want)
		}
	}
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	code, _, stderr := mainRun("-config", missing)
	if code != 1 || !strings.Contains(stderr, missing) {
		t.Errorf("missing file: exit %d, stderr %q; want 1 naming %s", code, stderr, missing)
	}
}

// TestCommandLineMistakes: two files, a misspelled subcommand or a stray
// argument exits 2 with a message — never a check of the default file
// reported as success, never a server started.
func TestCommandLineMistakes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"validate", "a.yaml", "b.yaml"}, `rlproxy: validate: one file, not 2`},
		{[]string{"validate", "-config", "a.yaml", "b.yaml"}, `rlproxy: validate: the file is -config a.yaml or the argument "b.yaml", not both`},
		{[]string{"valdiate", "-config", "x.yaml"}, `rlproxy: unknown command "valdiate"`},
		{[]string{"-config", "x.yaml", "valdiate"}, `rlproxy serve: unexpected argument "valdiate"`},
		{[]string{"version", "extra"}, `rlproxy: version takes no arguments`},
		{[]string{"compare", "edge"}, `rlproxy compare: unexpected argument "edge"`},
	} {
		code, out, errOut := mainRun(tc.args...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, tc.msg) {
			t.Errorf("rlproxy %v: exit %d, stdout %q, stderr %q; want exit 2 and stderr starting %q", tc.args, code, out, errOut, tc.msg)
		}
	}
	if code, out, _ := mainRun("-h"); code != 0 || !strings.Contains(out, "rlproxy validate [-allow-missing-env]") {
		t.Errorf("rlproxy -h: exit %d, %q; want the usage", code, out)
	}
}

// TestValidateMaxConfigBytes: -max-config-bytes refuses a larger file by
// name, before parsing it; the default accepts it.
func TestValidateMaxConfigBytes(t *testing.T) {
	body := "upstreams: { app: { builtin: echo } }\nroutes: [{ name: r, upstream: app }]\n"
	p := mainWrite(t, "small.yaml", body)
	if code, _, errs := mainRun("validate", "-config", p); code != 0 {
		t.Fatalf("default limit: exit %d: %s", code, errs)
	}
	code, _, errs := mainRun("validate", "-config", p, "-max-config-bytes", "50")
	want := p + ": 75 bytes, over the limit of 50 bytes (rlproxy -max-config-bytes)\nrlproxy: configuration file " + p + " test failed\n"
	if code != 1 || errs != want {
		t.Errorf("exit %d, stderr:\n%s\nwant 1 and:\n%s", code, errs, want)
	}
}
