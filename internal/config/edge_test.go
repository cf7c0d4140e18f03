package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEdgeLimits decodes max_body_size (server default, a route's own, 0
// = off), limit_rate and limit_rate_after: bytes as a whole number or with
// a unit (nginx's k, m, g; KiB, MiB, GiB), and each mistake as
// FILE:LINE: field: message.
func TestEdgeLimits(t *testing.T) {
	const ups = "upstreams: { app: { builtin: echo } }\n"
	c, err := ParseWith("x.yaml", []byte(ups+`server: { max_body_size: 1MiB }
routes:
  - { name: a, upstream: app }
  - { name: b, upstream: app, max_body_size: 0 }
  - { name: c, upstream: app, max_body_size: 256k, limit_rate: 1m, limit_rate_after: 512 }
  - { name: d, upstream: app, max_body_size: 2g, limit_rate: 1_000_000 }
`), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ body, rate, after int64 }{{1 << 20, 0, 0}, {0, 0, 0}, {256 << 10, 1 << 20, 512}, {2 << 30, 1_000_000, 0}}
	for i, w := range want {
		r := c.Routes[i]
		if r.MaxBodySize != w.body || r.LimitRate != w.rate || r.LimitRateAfter != w.after {
			t.Errorf("route %s: max_body_size %d, limit_rate %d, limit_rate_after %d; want %+v", r.Name, r.MaxBodySize, r.LimitRate, r.LimitRateAfter, w)
		}
	}
	if c.Server.MaxBodySize != 1<<20 {
		t.Errorf("server.max_body_size %d, want 1 MiB", c.Server.MaxBodySize)
	}
	for _, tt := range []struct{ src, want string }{
		{"server: { max_body_size: -1 }\nroutes: [{ name: r, upstream: app }]\n",
			`x.yaml:2: server.max_body_size: "-1": want bytes: a whole number, or one with a unit such as 512k, 1MiB, 2g`},
		{"routes:\n  - name: r\n    upstream: app\n    max_body_size: 1MB\n",
			`x.yaml:5: routes[0].max_body_size: "1MB": want bytes: a whole number, or one with a unit such as 512k, 1MiB, 2g`},
		{"routes:\n  - name: r\n    upstream: app\n    limit_rate: 2048g\n",
			`x.yaml:5: routes[0].limit_rate: "2048g": must be at most 1 TiB`},
		{"routes:\n  - name: r\n    upstream: app\n    limit_rate_after: [1]\n",
			`x.yaml:5: routes[0].limit_rate_after: a list: want bytes: a whole number, or one with a unit such as 512k, 1MiB, 2g`},
	} {
		_, err := ParseWith("x.yaml", []byte(ups+tt.src), LoadOptions{})
		if err == nil || err.Error() != tt.want {
			t.Errorf("%q: got %v\nwant %s", tt.src, err, tt.want)
		}
	}
}

// edgeTLSFiles writes a self-signed certificate, its key and a CA bundle
// (the same certificate) into a temporary directory.
func edgeTLSFiles(t *testing.T) (dir string) {
	t.Helper()
	dir = t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "t"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	for name, b := range map[string][]byte{"c.pem": certPEM, "ca.pem": certPEM, "k.pem": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), "empty.pem": []byte("x\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestClientAuth decodes tls.client_ca and client_auth: the default
// (require with a CA, none without), request and require needing a CA, a
// CA file without a certificate, and the tls:FIELD key sources with the
// warnings of a tls key no certificate reaches.
func TestClientAuth(t *testing.T) {
	dir := edgeTLSFiles(t)
	const tail = "upstreams: { app: { builtin: echo } }\nroutes: [{ name: r, upstream: app }]\n"
	tlsYAML := func(extra string) string {
		return "tls:\n  cert_file: c.pem\n  key_file: k.pem\n" + extra
	}
	path := filepath.Join(dir, "x.yaml")
	parse := func(src string) (*Config, error) { return ParseWith(path, []byte(src), LoadOptions{}) }
	c, err := parse(tlsYAML("  client_ca: ca.pem\n") + tail)
	if err != nil {
		t.Fatal(err)
	}
	if c.TLS.ClientAuth != ClientAuthRequire || c.TLS.ClientCA != filepath.Join(dir, "ca.pem") {
		t.Errorf("client_ca alone: client_auth %q, client_ca %q; want require and the resolved path", c.TLS.ClientAuth, c.TLS.ClientCA)
	}
	if c, err = parse(tlsYAML("") + tail); err != nil || c.TLS.ClientAuth != ClientAuthNone {
		t.Errorf("no client_ca: client_auth %q (%v), want none", c.TLS.ClientAuth, err)
	}
	for _, tt := range []struct{ src, want string }{
		{tlsYAML("  client_auth: require\n"), path + `:4: tls.client_auth: "require" needs tls.client_ca: the CAs a client certificate must chain to`},
		{tlsYAML("  client_auth: optional\n"), path + `:4: tls.client_auth: "optional": want none, request or require`},
		{tlsYAML("  client_ca: empty.pem\n"), path + `:4: tls.client_ca: "empty.pem": no PEM certificate in it`},
		{tlsYAML("  client_crl: c.pem\n"), path + `:4: tls.client_crl: needs tls.client_ca: the CA that signed the list`},
		{tlsYAML("  client_ca: ca.pem\n  client_crl: c.pem\n"), path + `:5: tls.client_crl: client_crl ` + filepath.Join(dir, "c.pem") + `: x509: unsupported crl version`}, // a certificate is no CRL
		{"policies:\n  p: { algorithm: fixed_window, limit: 1, window: 1s, key: tls:fingerprint }\n",
			path + `:2: policies.p.key: "tls:fingerprint": unknown certificate field; want tls:spki, tls:subject, tls:san:dns, tls:san:uri, tls:san:email`},
	} {
		_, err := parse(tt.src + tail)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%q: got %v\nwant %s", tt.src, err, tt.want)
		}
	}
	pol := "policies:\n  p: { algorithm: fixed_window, limit: 1, window: 1s, key: [tls:spki, ip] }\n"
	const rt = "upstreams: { app: { builtin: echo } }\nroutes: [{ name: r, upstream: app, policies: [p] }]\n"
	for _, tt := range []struct{ src, warn string }{
		{pol + rt, "policies.p.key: tls:spki: no client certificate reaches rlproxy"},
		{tlsYAML("  client_ca: ca.pem\n  client_auth: none\n") + pol + rt, "policies.p.key: tls:spki: no client certificate reaches rlproxy"},
		{tlsYAML("  client_ca: ca.pem\n") + pol + rt, ""},
		{tlsYAML("  client_ca: ca.pem\n") + pol + "real_ip: { trusted_proxies: [10.0.0.0/8] }\nforward_auth: { listen: \"127.0.0.1:9191\" }\n" + rt,
			"policies.p.key: tls:spki: requests decided over forward_auth or envoy_rls carry no client certificate"},
	} {
		c, err := parse(tt.src)
		if err != nil {
			t.Fatalf("%q: %v", tt.src, err)
		}
		var got []string
		for _, w := range c.Warnings {
			if strings.Contains(w.Msg, "tls:") {
				got = append(got, w.Field+": "+w.Msg)
			}
		}
		switch {
		case tt.warn == "" && len(got) > 0:
			t.Errorf("%q: warnings %q, want none", tt.src, got)
		case tt.warn != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tt.warn)):
			t.Errorf("%q: warnings %q, want one starting %q", tt.src, got, tt.warn)
		}
	}
}
