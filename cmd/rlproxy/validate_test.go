package main

import (
	"strings"
	"testing"
)

// secretsConfig names three environment variables no test sets.
const secretsConfig = `store:
  type: valkey
  key_hash_secret_env: RLPROXY_TEST_UNSET_SECRET
  valkey: { addrs: ["127.0.0.1:1"], password_env: RLPROXY_TEST_UNSET_PASSWORD }
upstreams:
  app:
    url: "http://127.0.0.1:3000"
    request_headers: { set_env: { X-Api-Key: RLPROXY_TEST_UNSET_KEY } }
routes:
  - { name: r, upstream: app }
`

// TestValidateAllowMissingEnv: without the flag an unset *_env variable is
// an error; with -allow-missing-env (CI, away from the secrets) each is a
// warning at its line and the file passes. A variable set too short stays
// an error either way.
func TestValidateAllowMissingEnv(t *testing.T) {
	p := mainWrite(t, "secrets.yaml", secretsConfig)
	code, _, stderr := mainRun("validate", p)
	want := p + ":3: store.key_hash_secret_env: environment variable RLPROXY_TEST_UNSET_SECRET is not set\n" +
		p + ":4: store.valkey.password_env: environment variable RLPROXY_TEST_UNSET_PASSWORD is not set\n" +
		p + ":8: upstreams.app.request_headers.set_env.X-Api-Key: environment variable RLPROXY_TEST_UNSET_KEY is not set\n" +
		"rlproxy: configuration file " + p + " test failed\n"
	if code != 1 || stderr != want {
		t.Errorf("without the flag: exit %d, stderr:\n%s\nwant exit 1 and:\n%s", code, stderr, want)
	}

	code, stdout, stderr := mainRun("validate", "-allow-missing-env", p)
	want = p + ":3: store.key_hash_secret_env: environment variable RLPROXY_TEST_UNSET_SECRET is not set (allowed: missing variables are warnings) (warning)\n" +
		p + ":4: store.valkey.password_env: environment variable RLPROXY_TEST_UNSET_PASSWORD is not set (allowed: missing variables are warnings) (warning)\n" +
		p + ":8: upstreams.app.request_headers.set_env.X-Api-Key: environment variable RLPROXY_TEST_UNSET_KEY is not set (allowed: missing variables are warnings) (warning)\n" +
		"rlproxy: listen :8080 (default), admin_listen 127.0.0.1:9090 (default)\n"
	if code != 0 || stderr != want || stdout != "rlproxy: configuration file "+p+" test is successful\n" {
		t.Errorf("-allow-missing-env: exit %d, stdout %q, stderr:\n%s\nwant exit 0 and:\n%s", code, stdout, stderr, want)
	}

	// The flag may follow the file too.
	if code2, stdout2, stderr2 := mainRun("validate", p, "-allow-missing-env"); code2 != code || stdout2 != stdout || stderr2 != stderr {
		t.Errorf("the flag after the file: exit %d, stdout %q, stderr:\n%s\nwant as before it", code2, stdout2, stderr2)
	}

	t.Setenv("RLPROXY_TEST_UNSET_SECRET", "short")
	code, _, stderr = mainRun("validate", "-allow-missing-env", p)
	if wantErr := p + ":3: store.key_hash_secret_env: environment variable RLPROXY_TEST_UNSET_SECRET holds 5 bytes; want at least 16\n"; code != 1 || !strings.HasPrefix(stderr, wantErr) {
		t.Errorf("a short secret: exit %d, stderr:\n%s\nwant exit 1 starting:\n%s", code, stderr, wantErr)
	}
}

// TestValidateMessages: the mistakes a new operator makes first get a
// message at the line to fix.
func TestValidateMessages(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		code       int
		want       string // FILE stands for the path
	}{
		{"indentation", "upstreams:\n  app:\n    url: \"http://127.0.0.1:3000\"\n    retries: 1\n   host: client\nroutes:\n  - { name: r, upstream: app }\n",
			1, "FILE:5: YAML syntax: did not find expected key\n"},
		{"list item", "upstreams: { app: { builtin: echo } }\nroutes:\n  - name: a\n    upstream: app\n   - name: b\n",
			1, "FILE:5: YAML syntax: did not find expected '-' indicator\n"},
		{"tab", "upstreams:\n  app:\n    builtin: echo\n\troutes: x\n",
			1, "FILE:4: YAML syntax: found a tab character that violates indentation\n"},
		{"no scheme", "upstreams: { app: { url: \"127.0.0.1:3000\" } }\nroutes: [{ name: r, upstream: app }]\n",
			1, `FILE:1: upstreams.app.url: "127.0.0.1:3000": want an http:// or https:// URL (no scheme: did you mean "http://127.0.0.1:3000"?)` + "\n"},
		{"no scheme, name", "upstreams: { app: { url: \"app:3000\" } }\nroutes: [{ name: r, upstream: app }]\n",
			1, `FILE:1: upstreams.app.url: "app:3000": want an http:// or https:// URL (no scheme: did you mean "http://app:3000"?)` + "\n"},
		{"pool", "upstreams: { app: { urls: [\"http://a:1\", \"b:2\"] } }\nroutes: [{ name: r, upstream: app }]\n",
			1, `FILE:1: upstreams.app.urls[1]: "b:2": want an http:// or https:// URL (no scheme: did you mean "http://b:2"?)` + "\n"},
		{"method typo", "upstreams: { app: { builtin: echo } }\nroutes:\n  - { name: r, upstream: app, match: { methods: [GET, GETT] } }\n",
			0, `FILE:3: routes[0].match.methods[1]: "GETT" is not a method of RFC 9110 or RFC 5789 (PATCH): matched as written; did you mean "GET"? (warning)` + "\n"},
		{"other token", "upstreams: { app: { builtin: echo } }\nroutes:\n  - { name: r, upstream: app, match: { methods: [propfind, patch] } }\n",
			0, `FILE:3: routes[0].match.methods[0]: "propfind" is not a method of RFC 9110 or RFC 5789 (PATCH): matched as written (warning)` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("RLPROXY_LISTEN", "")
			t.Setenv("RLPROXY_ADMIN_LISTEN", "")
			p := mainWrite(t, "x.yaml", tc.body)
			code, _, stderr := mainRun("validate", p)
			want := strings.ReplaceAll(tc.want, "FILE", p)
			if code != tc.code || !strings.HasPrefix(stderr, want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and first:\n%s", code, stderr, tc.code, want)
			}
		})
	}
}
