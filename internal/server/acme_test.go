package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/pebble"
	"rlproxy/internal/testutil/redisserver"
	"rlproxy/internal/testutil/rlproxytest"
)

// TestACMERefusedKeepsServing runs rlproxy with tls.acme against a pebble
// that refuses every request (each nonce rejected): rlproxy starts and
// keeps serving — the proxy over TLS with tls.cert_file's certificate,
// the admin listener, http_listen's redirect — logs the CA's problem and
// schedules a retry; once the CA answers again, the retry obtains the
// certificate, served without a restart.
func TestACMERefusedKeepsServing(t *testing.T) {
	httpPort, tlsPort := netutil.FreePort(t), netutil.FreePort(t)
	pb := pebble.Start(t, pebble.Options{HTTPPort: httpPort, TLSPort: tlsPort, Env: []string{"PEBBLE_WFE_NONCEREJECT=100"}})
	dir := t.TempDir()
	static := writeCert(t, dir, "static", "static.rlproxy.test", x509.ExtKeyUsageServerAuth).Leaf
	up := rlproxytest.NewUpstream(t)
	var log netutil.LockedBuffer
	in := rlproxytest.Start(t, fmt.Sprintf(`
listen: "127.0.0.1:%d"
tls:
  cert_file: %[2]s/static.pem
  key_file: %[2]s/static.key
  acme:
    domains: [a.rlproxy.test]
    ca: %[3]s
    ca_root: %[4]s
    storage: %[2]s/acme
    http_listen: "127.0.0.1:%[5]d"
upstreams:
  app: { url: %[6]s }
routes:
  - name: all
    match: { path_prefix: / }
    upstream: app
`, tlsPort, dir, pb.DirURL, pb.RootFile, httpPort, up.URL), rlproxytest.WithLog(&log))

	waitLog(t, &log, "urn:ietf:params:acme:error:badNonce", 60*time.Second)
	waitLog(t, &log, `msg="acme: will retry"`, 60*time.Second)
	// The proxy serves over TLS: tls.cert_file's certificate for its name,
	// and for the ACME name while its own certificate is not there.
	for _, name := range []string{"static.rlproxy.test", "a.rlproxy.test"} {
		c := httpsClient(static, name)
		resp, err := c.Get("https://" + in.App.Addr() + "/x")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "ok" {
			t.Fatalf("%s: %d %q, want the upstream's 200 ok", name, resp.StatusCode, body)
		}
	}
	if resp, _ := rlproxytest.Get(t, http.DefaultClient, in.AdminURL+"/readyz"); resp.StatusCode != http.StatusOK {
		t.Errorf("admin /readyz: %d, want 200", resp.StatusCode)
	}
	// http_listen redirects anything but a challenge to HTTPS on listen's port.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodPost, "http://"+in.App.ACMEHTTPAddr()+"/p?q=1", nil)
	req.Host = "a.rlproxy.test"
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := fmt.Sprintf("https://a.rlproxy.test:%d/p?q=1", tlsPort); resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
		t.Errorf("http_listen: %d Location %q, want 308 %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	if testing.Short() {
		return // the retry comes a minute later (certmagic's first backoff)
	}
	pb.Restart()
	roots := pb.Roots(t)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	err = netutil.Poll(ctx, nil, 250*time.Millisecond, func() error {
		c, err := tls.Dial("tcp", in.App.Addr(), &tls.Config{ServerName: "a.rlproxy.test", RootCAs: roots, MinVersion: tls.VersionTLS12})
		if err == nil {
			c.Close()
		}
		return err
	})
	if err != nil {
		t.Fatalf("no certificate after the CA came back: %v", err)
	}
	waitLog(t, &log, `msg="acme: certificate obtained successfully"`, 10*time.Second)
}

// TestACMEOnPublicListener obtains a certificate by TLS-ALPN-01 through
// rlproxy's own public listener (its connection caps and guards, and
// client_auth: require, though the CA's validation presents no client
// certificate) and serves it, and the upstream behind it, to a client with
// a certificate; the expiry metric shows it on the admin listener.
func TestACMEOnPublicListener(t *testing.T) {
	httpPort, tlsPort := netutil.FreePort(t), netutil.FreePort(t)
	pb := pebble.Start(t, pebble.Options{HTTPPort: httpPort, TLSPort: tlsPort})
	dir := t.TempDir()
	client := writeCert(t, dir, "client", "client.rlproxy.test", x509.ExtKeyUsageClientAuth)
	up := rlproxytest.NewUpstream(t)
	in := rlproxytest.Start(t, fmt.Sprintf(`
listen: "127.0.0.1:%d"
tls:
  client_ca: %[2]s/client.pem
  client_auth: require
  acme:
    domains: [a.rlproxy.test]
    ca: %[3]s
    ca_root: %[4]s
    storage: %[2]s/acme
    challenges: [tls-alpn-01]
upstreams:
  app: { url: %[5]s }
routes:
  - name: all
    match: { path_prefix: / }
    upstream: app
`, tlsPort, dir, pb.DirURL, pb.RootFile, up.URL))
	roots := pb.Roots(t)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, ServerName: "a.rlproxy.test", MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{client}}}}
	var leaf *x509.Certificate
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	err := netutil.Poll(ctx, nil, 100*time.Millisecond, func() error {
		resp, err := c.Get("https://" + in.App.Addr() + "/x")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(body) != "ok" {
			return fmt.Errorf("%d %q", resp.StatusCode, body)
		}
		leaf = resp.TLS.PeerCertificates[0]
		return nil
	})
	if err != nil {
		t.Fatalf("no verified request through rlproxy: %v", err)
	}
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "a.rlproxy.test" {
		t.Errorf("served certificate for %v, want [a.rlproxy.test]", leaf.DNSNames)
	}
	mf := in.Metrics(t)["rlproxy_tls_certificate_expiry_timestamp_seconds"]
	if mf == nil || len(mf.GetMetric()) != 1 || int64(mf.GetMetric()[0].GetGauge().GetValue()) != leaf.NotAfter.Unix() {
		t.Errorf("expiry metric %v, want a.rlproxy.test at %d", mf, leaf.NotAfter.Unix())
	}
}

// waitLog waits until log holds s.
func waitLog(t *testing.T, log *netutil.LockedBuffer, s string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := netutil.Poll(ctx, nil, 50*time.Millisecond, func() error {
		if strings.Contains(log.String(), s) {
			return nil
		}
		return fmt.Errorf("no %q in the log", s)
	})
	if err != nil {
		t.Fatalf("%v:\n%s", err, log.String())
	}
}

// httpsClient trusts cert alone and asks for name, whatever the address.
func httpsClient(cert *x509.Certificate, name string) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12},
		DialContext:     (&net.Dialer{}).DialContext,
	}}
}

// writeCert writes a self-signed certificate for name (and
// a.rlproxy.test, so that a client can verify it there too) and its key as
// dir/file.pem and dir/file.key, and returns it with its key.
func writeCert(t *testing.T, dir, file, name string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name, "a.rlproxy.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for ext, b := range map[string]*pem.Block{".pem": {Type: "CERTIFICATE", Bytes: der}, ".key": {Type: "EC PRIVATE KEY", Bytes: kb}} {
		if err := os.WriteFile(filepath.Join(dir, file+ext), pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	leaf, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// TestACMEFleetSharesValkey runs two rlproxy instances on one Valkey
// (store and tls.acme storage): they obtain one certificate between them
// — pebble creates one order — and both serve it.
func TestACMEFleetSharesValkey(t *testing.T) {
	httpPort, tlsPort := netutil.FreePort(t), netutil.FreePort(t)
	pb := pebble.Start(t, pebble.Options{HTTPPort: httpPort, TLSPort: tlsPort})
	srv := redisserver.Start(t)
	t.Setenv("RLPROXY_TEST_ACME_SECRET", "fleet-secret-0123456789")
	up := rlproxytest.NewUpstream(t)
	// The first instance holds the ports pebble validates on; the second
	// one's challenges, should it order, are answered by the first from
	// the shared storage.
	conf := func(listen, httpListen string) string {
		return fmt.Sprintf(`
listen: %q
store: { type: valkey, valkey: { addrs: [%q] } }
tls:
  acme:
    domains: [a.rlproxy.test]
    ca: %s
    ca_root: %s
    storage: valkey
    storage_secret_env: RLPROXY_TEST_ACME_SECRET
    http_listen: %q
    challenges: [http-01]
upstreams:
  app: { url: %s }
routes:
  - name: all
    match: { path_prefix: / }
    upstream: app
`, listen, srv.Addr, pb.DirURL, pb.RootFile, httpListen, up.URL)
	}
	a := rlproxytest.Start(t, conf(fmt.Sprintf("127.0.0.1:%d", tlsPort), fmt.Sprintf("127.0.0.1:%d", httpPort)))
	b := rlproxytest.Start(t, conf("127.0.0.1:0", netutil.FreeAddr(t)))
	roots := pb.Roots(t)
	serials := map[string]bool{}
	for _, in := range []*rlproxytest.Instance{a, b} {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		err := netutil.Poll(ctx, nil, 100*time.Millisecond, func() error {
			c, err := tls.Dial("tcp", in.App.Addr(), &tls.Config{ServerName: "a.rlproxy.test", RootCAs: roots, MinVersion: tls.VersionTLS12})
			if err != nil {
				return err
			}
			defer c.Close()
			serials[c.ConnectionState().PeerCertificates[0].SerialNumber.String()] = true
			return nil
		})
		cancel()
		if err != nil {
			t.Fatalf("%s: no certificate: %v", in.App.Addr(), err)
		}
	}
	if len(serials) != 1 {
		t.Errorf("the instances serve %d certificates, want one", len(serials))
	}
	if n := pb.Orders(); n != 1 {
		t.Errorf("pebble created %d orders, want 1", n)
	}
}
