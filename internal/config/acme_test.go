package config

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestACME decodes tls.acme: defaults (Let's Encrypt, the state
// directory, tls-alpn-01 plus http-01 with http_listen), ACME alone or
// with the certificate pair, and each mistake with its file:line.
func TestACME(t *testing.T) {
	dir := edgeTLSFiles(t)
	t.Setenv("RLPROXY_TEST_ACME_SECRET", "0123456789abcdef")
	const tail = "upstreams: { app: { builtin: echo } }\nroutes: [{ name: r, upstream: app }]\n"
	path := filepath.Join(dir, "x.yaml")
	parse := func(src string) (*Config, error) { return ParseWith(path, []byte(src), LoadOptions{}) }

	c, err := parse("tls:\n  acme:\n    domains: [API.example.com.]\n" + tail)
	if err != nil {
		t.Fatal(err)
	}
	a := c.TLS.ACME
	if a == nil || c.TLS.CertFile != "" || a.CA != DefaultACMECA || a.Storage != DefaultACMEStorage ||
		!slices.Equal(a.Challenges, []string{ChallengeTLSALPN01}) || !slices.Equal(a.Domains, []string{"api.example.com"}) || a.OnDemand {
		t.Fatalf("defaults: %+v", a)
	}
	c, err = parse("tls:\n  cert_file: c.pem\n  key_file: k.pem\n  acme:\n    domains: [a.example.com, b.example.com]\n" +
		"    ca: https://127.0.0.1:14000/dir\n    ca_root: ca.pem\n    storage: state\n    http_listen: \":80\"\n    email: ops@example.com\n" + tail)
	if err != nil {
		t.Fatal(err)
	}
	a = c.TLS.ACME
	if c.TLS.CertFile != filepath.Join(dir, "c.pem") || a.CARoot != filepath.Join(dir, "ca.pem") || a.Storage != filepath.Join(dir, "state") ||
		!slices.Equal(a.Challenges, []string{ChallengeHTTP01, ChallengeTLSALPN01}) || a.HTTPListen != ":80" || a.Email != "ops@example.com" {
		t.Fatalf("with the certificate pair: %+v, cert_file %q", a, c.TLS.CertFile)
	}
	const valkeyStore = "store: { type: valkey, valkey: { addrs: [\"127.0.0.1:6379\"] } }\n"
	c, err = parse(valkeyStore + "tls:\n  acme:\n    domains: [a.example.com]\n    storage: valkey\n    storage_secret_env: RLPROXY_TEST_ACME_SECRET\n" + tail)
	if err != nil || string(c.TLS.ACME.StorageSecret) != "0123456789abcdef" {
		t.Fatalf("valkey storage: %v", err)
	}

	// Beside a directory the secret is unused: a warning, even unset.
	c, err = parse("tls:\n  acme:\n    domains: [a.example.com]\n    storage_secret_env: RLPROXY_TEST_ACME_UNSET\n" + tail)
	if want := path + ":4: tls.acme.storage_secret_env: unused: only storage valkey is encrypted (a directory is protected by its 0700 permissions)"; err != nil ||
		len(c.Warnings) != 1 || c.Warnings[0].String() != want || c.TLS.ACME.StorageSecret != nil {
		t.Fatalf("secret beside a directory: %v, warnings %v, want %s", err, c.Warnings, want)
	}

	acme := func(lines ...string) string {
		return "tls:\n  acme:\n    " + strings.Join(lines, "\n    ") + "\n"
	}
	for _, tt := range []struct{ src, want string }{
		{"tls:\n  acme:\n    email: a@b.c\n", path + `:2: tls.acme.domains: required: the names to obtain certificates for`},
		{acme("domains: [a.example.com]", "email: ops"), path + `:4: tls.acme.email: "ops": want an email address such as ops@example.com`},
		{acme("domains: [a.example.com]", `email: "Ops <ops@example.com>"`), path + `:4: tls.acme.email: "Ops <ops@example.com>": want an email address such as ops@example.com`},
		{acme("domains: []"), path + `:3: tls.acme.domains: want at least one name`},
		{acme(`domains: ["*.example.com"]`), path + `:3: tls.acme.domains[0]: "*.example.com": wildcard names need the DNS-01 challenge, which rlproxy does not support`},
		{acme("domains: [localhost]"), path + `:3: tls.acme.domains[0]: "localhost": want a DNS host name`},
		{acme("domains: [a.example.com, A.example.com]"), path + `:3: tls.acme.domains[1]: "A.example.com": listed twice`},
		{acme("domains: [a.example.com]", "ca: http://ca.example/dir"), path + `:4: tls.acme.ca: "http://ca.example/dir": want the https:// URL of an ACME directory`},
		{acme("domains: [a.example.com]", "ca_root: empty.pem"), path + `:4: tls.acme.ca_root: "empty.pem": no PEM certificate in it`},
		{acme("domains: [a.example.com]", "challenges: [dns-01]"), path + `:4: tls.acme.challenges[0]: "dns-01": want http-01 or tls-alpn-01 (DNS-01, for wildcard names, is not supported)`},
		{acme("domains: [a.example.com]", "challenges: [http-01]"), path + `:4: tls.acme.challenges: http-01 needs tls.acme.http_listen: the plain listener the CA validates on`},
		{acme("domains: [a.example.com]", "storage: c.pem"), path + `:4: tls.acme.storage: "c.pem": not a directory`},
		{acme("domains: [a.example.com]", "storage: valkey"), path + `:2: tls.acme.storage_secret_env: required with storage valkey: the secret that encrypts the stored keys`},
		{acme("domains: [a.example.com]", "storage: valkey", "storage_secret_env: RLPROXY_TEST_ACME_SECRET"), path + `:4: tls.acme.storage: valkey needs store type valkey: the certificates are kept on its store.valkey server`},
		{acme("domains: [a.example.com]", `http_listen: "127.0.0.1:9090"`), path + `:4: tls.acme.http_listen: "127.0.0.1:9090": must not share the admin_listen listener "127.0.0.1:9090"`},
		{"listen: \"\"\n" + acme("domains: [a.example.com]"), path + `:2: tls.acme: needs a public listener (listen): certificates are served there`},
		{"tls:\n  cert_file: c.pem\n  acme:\n    domains: [a.example.com]\n", path + `:1: tls.key_file: required with cert_file: the certificate's private key`},
		{"tls:\n  client_ca: ca.pem\n", path + `:1: tls.cert_file: required: a PEM file` + "\n" + path + `:1: tls.key_file: required: a PEM file`},
	} {
		_, err := parse(tt.src + tail)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%q: got %v\nwant %s", tt.src, err, tt.want)
		}
	}
}
