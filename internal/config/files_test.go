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
	"reflect"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/algo"
)

// TestConfigsDir loads every example in configs/ (keys files aside: they
// are loaded through the config that names them).
func TestConfigsDir(t *testing.T) {
	t.Setenv("VALKEY_PASSWORD", "test-password")
	t.Setenv("RLPROXY_KEY_HASH_SECRET", "test-key-hash-secret")
	files, err := filepath.Glob("../../configs/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	loaded := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".keys.yaml") {
			continue
		}
		loaded++
		c, err := LoadWith(f, LoadOptions{})
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(c.Warnings) != 0 {
			t.Errorf("%s: warnings %v", f, c.Warnings)
		}
	}
	if loaded < 4 {
		t.Errorf("loaded %d files from configs/, want at least 4", loaded)
	}
}

// TestDemoConfig pins docs/PRODUCT.md's small API in configs/rlproxy.yaml: a
// token bucket of 5 refilled at 30r/m (one token per 2 s).
func TestDemoConfig(t *testing.T) {
	c, err := LoadWith("../../configs/rlproxy.yaml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Policies["api"].Limit, (algo.Limit{Kind: algo.TokenBucket, Count: 30, Period: 60_000, Burst: 5}); got != want {
		t.Errorf("api limit %+v, want %+v", got, want)
	}
	if got, want := c.Policies["login"].Limit, (algo.Limit{Kind: algo.LeakyBucket, Count: 30, Period: 60_000, Burst: 5, NoDelay: true}); got != want {
		t.Errorf("login limit %+v, want %+v", got, want)
	}
	if got := c.Upstreams["demo"].Builtin; got != "echo" {
		t.Errorf("demo upstream builtin %q, want echo", got)
	}
	var names []string
	for _, r := range c.Routes {
		names = append(names, r.Name+" "+r.Match.PathPrefix)
	}
	if got, want := strings.Join(names, ","), "api /api/,login /login,rest /"; got != want {
		t.Errorf("routes %s, want %s", got, want)
	}
}

// TestPlans checks the plans example: inline keys merged with the keys
// file, default plan, policy lists, route cost.
func TestPlans(t *testing.T) {
	c, err := LoadWith("../../configs/tiers.yaml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := c.Plans["tiers"]
	want := &Plans{
		Name:     "tiers",
		Key:      KeySpec{Sources: []Source{{Kind: SourceHeader, Name: "X-Api-Key"}}, IPv4Prefix: 32, IPv6Prefix: 128},
		Keys:     &Credentials{list: []credential{{"k-free-1", 0}, {"k-pro-1", 1}, {"k-pro-2", 1}, {"k-free-2", 0}}, plans: []string{"free", "pro"}},
		KeysFile: filepath.Join("../../configs", "tiers.keys.yaml"),
		Default:  "free",
		Plans:    map[string][]string{"free": {"free_hourly", "free_daily"}, "pro": {"pro_hourly", "pro_daily"}},
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("plans:\n got  %+v\n want %+v", p, want)
	}
	if r := c.Routes[1]; r.Plan != "tiers" || r.Cost != 10 {
		t.Errorf("route %+v, want plan tiers, cost 10", r)
	}
	if got, want := c.Policies["pro_daily"].Limit, (algo.Limit{Kind: algo.SlidingWindow, Count: 100_000, Period: 86_400_000}); got != want {
		t.Errorf("pro_daily %+v, want %+v", got, want)
	}
}

// TestDigest: identical content gives the same digest; a change in the
// config or in its keys file gives another (so it is a reload).
func TestDigest(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	keys := filepath.Join(dir, "k.yaml")
	src := `upstreams: { app: { builtin: echo } }
policies: { p: { algorithm: fixed_window, limit: 5, window: 1s } }
plans:
  t: { key: "header:K", keys_file: k.yaml, default: a, plans: { a: [p], b: [] } }
routes: [{ name: r, upstream: app, plan: t }]
`
	write := func(path, s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	digest := func() [32]byte {
		c, err := LoadWith(cfg, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Digest
	}
	write(cfg, src)
	write(keys, "k1: a\n")
	d1 := digest()
	if d1 == [32]byte{} || digest() != d1 {
		t.Fatalf("digest not stable: %x", d1)
	}
	write(keys, "k1: b\n")
	d2 := digest()
	if d2 == d1 {
		t.Error("keys_file change left the digest unchanged")
	}
	write(cfg, src+"# comment\n")
	if digest() == d2 {
		t.Error("config change left the digest unchanged")
	}
}

// TestTLS loads a generated certificate and refuses a key that does not
// match it.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	writePair := func(cert, key string) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rlproxy test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, cert), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, key), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writePair("a.crt", "a.key")
	writePair("b.crt", "b.key")
	base := "upstreams:\n  app: { url: \"https://127.0.0.1:9443\", ca_file: a.crt }\nroutes: [{ name: r, upstream: app }]\n"
	cfg := filepath.Join(dir, "c.yaml")

	c, err := ParseWith(cfg, []byte("tls: { cert_file: a.crt, key_file: a.key }\n"+base), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (&TLS{CertFile: filepath.Join(dir, "a.crt"), KeyFile: filepath.Join(dir, "a.key"), ClientAuth: ClientAuthNone}); !reflect.DeepEqual(c.TLS, want) {
		t.Errorf("TLS %+v, want %+v", c.TLS, want)
	}
	if got := c.Upstreams["app"].CAFile; got != filepath.Join(dir, "a.crt") {
		t.Errorf("CAFile %q", got)
	}

	_, err = ParseWith(cfg, []byte("tls: { cert_file: a.crt, key_file: b.key }\n"+base), LoadOptions{})
	want := cfg + ":1: tls: loading certificate and key: tls: private key does not match public key"
	if err == nil || err.Error() != want {
		t.Errorf("mismatched pair: %v\nwant %s", err, want)
	}
	_, err = ParseWith(cfg, []byte("upstreams:\n  app: { url: \"https://x:1\", ca_file: a.key }\nroutes: [{ name: r, upstream: app }]\n"), LoadOptions{})
	want = cfg + `:2: upstreams.app.ca_file: "a.key": no PEM certificate in it`
	if err == nil || err.Error() != want {
		t.Errorf("key as CA: %v\nwant %s", err, want)
	}
}

// TestWarnings: valid but weak settings are warnings, not errors.
func TestWarnings(t *testing.T) {
	t.Setenv("RLPROXY_TEST_PASSWORD", "pw")
	src := `store:
  type: valkey
  valkey: { addrs: ["127.0.0.1:6379"], password_env: RLPROXY_TEST_PASSWORD }
real_ip: { header: X-Real-IP }
upstreams: { app: { builtin: echo } }
policies:
  p: { algorithm: token_bucket, rate: 1r/s, burst: 1, key: "jwt:sub" }
routes: [{ name: r, upstream: app, policies: [p] }]
`
	c, err := ParseWith("w.yaml", []byte(src), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range c.Warnings {
		got = append(got, w.String())
	}
	want := []string{
		"w.yaml:1: store.key_hash_secret_env: not set: credential-derived keys in Valkey are hashed with rlproxy's built-in (public) secret",
		"w.yaml:4: real_ip.header: ignored: no trusted_proxies, so the peer address is always the client",
		"w.yaml:7: policies.p.key: jwt:sub is read from unverified tokens (jwt.hmac_secret_env is not set), so a client can claim any value",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
