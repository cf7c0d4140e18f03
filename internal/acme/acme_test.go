package acme

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"io/fs"
	stdlog "log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rlproxy/internal/config"
	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/pebble"
)

// obtainTimeout bounds how long pebble may take to issue (a few round
// trips and two validations on loopback; generous for a loaded machine).
const obtainTimeout = 90 * time.Second

var testNames = []string{"a.rlproxy.test", "b.rlproxy.test"}

// env is one test's pebble, the ports it validates on and the log the
// Manager writes.
type env struct {
	pebble            *pebble.Pebble
	httpAddr, tlsAddr string
	log               *netutil.LockedBuffer
}

func newEnv(t *testing.T, opts pebble.Options) *env {
	httpPort, tlsPort := netutil.FreePort(t), netutil.FreePort(t)
	opts.HTTPPort, opts.TLSPort = httpPort, tlsPort
	return &env{
		pebble:   pebble.Start(t, opts),
		httpAddr: fmt.Sprintf("127.0.0.1:%d", httpPort),
		tlsAddr:  fmt.Sprintf("127.0.0.1:%d", tlsPort),
		log:      &netutil.LockedBuffer{},
	}
}

// acmeConfig is tls.acme for e's pebble, as the config loader settles it.
func (e *env) acmeConfig(t *testing.T, challenges ...string) *config.ACME {
	c := &config.ACME{Domains: testNames, CA: e.pebble.DirURL, CARoot: e.pebble.RootFile,
		Challenges: challenges, Storage: filepath.Join(t.TempDir(), "acme")}
	for _, ch := range challenges {
		if ch == config.ChallengeHTTP01 {
			c.HTTPListen = e.httpAddr
		}
	}
	return c
}

// start builds and starts a Manager for c with a public TLS listener on
// addr serving "ok", as rlproxy's public listener does (base: the load's
// own config, with tls.cert_file's certificate if any; nil = a plain one).
func (e *env) start(t *testing.T, c *config.ACME, addr string, base *tls.Config, opts Options) *Manager {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	opts.Log = slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.PublicAddr = ln.Addr().String()
	if base == nil {
		base = &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	}
	opts.Static = func() *tls.Certificate {
		if len(base.Certificates) == 0 {
			return nil
		}
		return &base.Certificates[0]
	}
	m, err := New(c, opts)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	tln := tls.NewListener(ln, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		return m.ConfigForClient(h, base), nil
	}})
	hs := &http.Server{
		Handler:  http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }),
		ErrorLog: stdlog.New(io.Discard, "", 0), // handshakes before the certificate is there
	}
	go func() { _ = hs.Serve(tln) }()
	t.Cleanup(func() {
		_ = hs.Close()
		m.Close()
	})
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	return m
}

// handshake connects to addr asking for name and trusting roots, with a
// client certificate for a listener that asks for one.
func handshake(addr, name string, roots *x509.CertPool) (*tls.Conn, error) {
	d := &net.Dialer{Timeout: 2 * time.Second}
	return tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: name, RootCAs: roots, MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &clientCert, nil }})
}

// clientCert is the test clients' certificate.
var clientCert = selfSigned(nil, "client.rlproxy.test")

// selfSigned is a self-signed certificate for name, valid a day (t nil:
// panics on failure).
func selfSigned(t *testing.T, name string) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err == nil {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
		var der []byte
		if der, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key); err == nil {
			leaf, _ := x509.ParseCertificate(der)
			return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
		}
	}
	if t == nil {
		panic(err)
	}
	t.Fatal(err)
	return tls.Certificate{}
}

// waitServed waits until addr serves name a certificate roots verify and
// returns its leaf.
func waitServed(t *testing.T, addr, name string, roots *x509.CertPool, log fmt.Stringer) *x509.Certificate {
	t.Helper()
	var leaf *x509.Certificate
	ctx, cancel := context.WithTimeout(context.Background(), obtainTimeout)
	defer cancel()
	err := netutil.Poll(ctx, nil, 100*time.Millisecond, func() error {
		c, err := handshake(addr, name, roots)
		if err != nil {
			return err
		}
		defer c.Close()
		leaf = c.ConnectionState().PeerCertificates[0]
		return nil
	})
	if err != nil {
		t.Fatalf("%s: no verified certificate within %v: %v\nlog:\n%s", name, obtainTimeout, err, log)
	}
	return leaf
}

// TestObtainHTTP01 obtains a certificate for each of two names by HTTP-01
// answered on http_listen and serves them to a client trusting only
// pebble's root; the files are kept 0600 in a 0700 directory.
func TestObtainHTTP01(t *testing.T) {
	e := newEnv(t, pebble.Options{})
	c := e.acmeConfig(t, config.ChallengeHTTP01)
	e.start(t, c, e.tlsAddr, nil, Options{})
	roots := e.pebble.Roots(t)
	for _, name := range testNames {
		leaf := waitServed(t, e.tlsAddr, name, roots, e.log)
		if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != name {
			t.Errorf("%s: certificate names %v, want [%s]", name, leaf.DNSNames, name)
		}
	}
	if n := solved(e.log, config.ChallengeHTTP01); n != len(testNames) {
		t.Errorf("%d http-01 challenges solved, want %d:\n%s", n, len(testNames), e.log)
	}
	if n := solved(e.log, config.ChallengeTLSALPN01); n != 0 {
		t.Errorf("%d tls-alpn-01 challenges tried though only http-01 is configured", n)
	}
	if !strings.Contains(e.log.String(), `msg="acme: served key authentication" challenge=http-01`) {
		t.Errorf("http_listen served no key authorization:\n%s", e.log)
	}
	checkModes(t, c.Storage)
}

// checkModes fails t unless every file under dir is 0600 and every
// directory 0700: the account and certificate keys are the operator's.
func checkModes(t *testing.T, dir string) {
	t.Helper()
	keys := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		if strings.HasSuffix(p, ".key") {
			keys++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if keys < 3 { // the account's and one per name
		t.Errorf("%d private keys under %s, want at least 3", keys, dir)
	}
}

// solved counts the challenges of type typ certmagic set out to solve.
func solved(log fmt.Stringer, typ string) int {
	n := 0
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, `msg="acme: trying to solve challenge"`) && strings.Contains(line, "challenge_type="+typ+" ") {
			n++
		}
	}
	return n
}

// TestObtainTLSALPN01 obtains the two names' certificates by TLS-ALPN-01
// answered in the public listener's own handshakes — though that listener
// requires a client certificate, which the CA's validation has not — and
// serves the static certificate (tls.cert_file) for a name ACME does not
// cover.
func TestObtainTLSALPN01(t *testing.T) {
	e := newEnv(t, pebble.Options{})
	c := e.acmeConfig(t, config.ChallengeTLSALPN01)
	static := selfSigned(t, "static.rlproxy.test")
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"},
		Certificates: []tls.Certificate{static}, ClientAuth: tls.RequireAnyClientCert}
	e.start(t, c, e.tlsAddr, base, Options{})
	roots := e.pebble.Roots(t)
	for _, name := range testNames {
		leaf := waitServed(t, e.tlsAddr, name, roots, e.log)
		if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != name {
			t.Errorf("%s: certificate names %v, want [%s]", name, leaf.DNSNames, name)
		}
	}
	if n := solved(e.log, config.ChallengeTLSALPN01); n != len(testNames) {
		t.Errorf("%d tls-alpn-01 challenges solved, want %d:\n%s", n, len(testNames), e.log)
	}
	if n := solved(e.log, config.ChallengeHTTP01); n != 0 {
		t.Errorf("%d http-01 challenges tried though only tls-alpn-01 is configured", n)
	}
	// Another name gets tls.cert_file's certificate.
	pool := x509.NewCertPool()
	pool.AddCert(static.Leaf)
	conn, err := handshake(e.tlsAddr, "static.rlproxy.test", pool)
	if err != nil {
		t.Fatalf("static.rlproxy.test: %v", err)
	}
	conn.Close()
}

// TestRenewWithoutRestart has pebble sign 40-second certificates, so
// certmagic (checking every second) renews within the test: a new
// handshake gets the new certificate while a connection opened on the old
// one keeps serving requests, and the expiry metric follows.
func TestRenewWithoutRestart(t *testing.T) {
	e := newEnv(t, pebble.Options{Validity: 40 * time.Second})
	c := e.acmeConfig(t, config.ChallengeHTTP01)
	c.Domains = testNames[:1]
	reg := prometheus.NewRegistry()
	e.start(t, c, e.tlsAddr, nil, Options{RenewCheckInterval: time.Second, Registerer: reg})
	roots := e.pebble.Roots(t)
	name := testNames[0]
	first := waitServed(t, e.tlsAddr, name, roots, e.log)
	if got := expiry(t, reg, name); got != first.NotAfter.Unix() {
		t.Errorf("expiry metric %d, want the first certificate's %d", got, first.NotAfter.Unix())
	}
	// A keep-alive connection on the first certificate.
	conn, err := handshake(e.tlsAddr, name, roots)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if s := conn.ConnectionState().PeerCertificates[0].SerialNumber; s.Cmp(first.SerialNumber) != 0 {
		t.Fatalf("kept connection got serial %v, want the first certificate's %v", s, first.SerialNumber)
	}
	br := bufio.NewReader(conn)
	get(t, conn, br, name)
	var renewed *x509.Certificate
	ctx, cancel := context.WithTimeout(context.Background(), obtainTimeout)
	defer cancel()
	err = netutil.Poll(ctx, nil, 200*time.Millisecond, func() error {
		leaf := waitServed(t, e.tlsAddr, name, roots, e.log)
		if leaf.SerialNumber.Cmp(first.SerialNumber) == 0 {
			return errors.New("still the first certificate")
		}
		renewed = leaf
		return nil
	})
	if err != nil {
		t.Fatalf("not renewed: %v\nlog:\n%s", err, e.log)
	}
	if !renewed.NotAfter.After(first.NotAfter) {
		t.Errorf("renewed certificate expires %v, not after the first's %v", renewed.NotAfter, first.NotAfter)
	}
	get(t, conn, br, name) // the connection opened before the renewal still serves
	if got := expiry(t, reg, name); got != renewed.NotAfter.Unix() {
		t.Errorf("expiry metric %d, want the renewed certificate's %d", got, renewed.NotAfter.Unix())
	}
	if !strings.Contains(e.log.String(), `msg="acme: certificate renewed successfully"`) {
		t.Errorf("no renewal in the log:\n%s", e.log)
	}
}

// get sends one keep-alive request on conn and checks its "ok".
func get(t *testing.T, conn *tls.Conn, br *bufio.Reader, host string) {
	t.Helper()
	if _, err := fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host); err != nil {
		t.Fatalf("request on the kept connection: %v", err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("response on the kept connection: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("kept connection: %d %q", resp.StatusCode, body)
	}
}

// expiry is rlproxy_tls_certificate_expiry_timestamp_seconds{name} in reg
// (0 when absent).
func expiry(t *testing.T, reg *prometheus.Registry, name string) int64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "rlproxy_tls_certificate_expiry_timestamp_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == name {
				return int64(m.GetGauge().GetValue())
			}
		}
	}
	return 0
}

// TestOnDemand obtains a listed name's certificate at its first handshake
// (nothing at start), and refuses a name outside domains.
func TestOnDemand(t *testing.T) {
	e := newEnv(t, pebble.Options{})
	c := e.acmeConfig(t, config.ChallengeTLSALPN01)
	c.OnDemand = true
	e.start(t, c, e.tlsAddr, nil, Options{})
	if n := e.pebble.Orders(); n != 0 {
		t.Fatalf("%d orders at start with on_demand, want 0", n)
	}
	roots := e.pebble.Roots(t)
	d := &net.Dialer{Timeout: obtainTimeout}
	conn, err := tls.DialWithDialer(d, "tcp", e.tlsAddr, &tls.Config{ServerName: testNames[0], RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("first handshake for %s: %v\nlog:\n%s", testNames[0], err, e.log)
	}
	conn.Close()
	if n := e.pebble.Orders(); n != 1 {
		t.Errorf("%d orders after one name's handshake, want 1", n)
	}
	_, err = tls.DialWithDialer(d, "tcp", e.tlsAddr, &tls.Config{ServerName: "c.rlproxy.test", RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err == nil {
		t.Fatal("a name outside domains got a certificate")
	}
	if n := e.pebble.Orders(); n != 1 {
		t.Errorf("%d orders after a name outside domains, want still 1", n)
	}
}
