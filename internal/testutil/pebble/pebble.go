// Package pebble starts Let's Encrypt's pebble, a real ACME server (RFC
// 8555) for tests, on free loopback ports, with pebble-challtestsrv as
// its DNS server answering 127.0.0.1 for every name: a test's listeners
// are validated on loopback as a public CA validates a host.
//
// The binaries are taken from PATH (Debian's pebble package has both).
// When they are missing the test is skipped, unless the environment sets
// RLPROXY_REQUIRE_TOOLS=1 (scripts/test.sh), where it fails.
package pebble

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"rlproxy/internal/testutil/netutil"
)

// startTimeout bounds how long pebble may take to answer its directory.
const startTimeout = 20 * time.Second

// Options configure one pebble.
type Options struct {
	// HTTPPort and TLSPort are where pebble validates HTTP-01 and
	// TLS-ALPN-01 (a public CA uses 80 and 443).
	HTTPPort, TLSPort int
	// Validity is the issued certificates' lifetime (whole seconds; 0 =
	// pebble's default of about five years).
	Validity time.Duration
	// Env is added to pebble's environment, e.g. PEBBLE_WFE_NONCEREJECT=100
	// (refuse every nonce). PEBBLE_VA_NOSLEEP=1 and
	// PEBBLE_VA_ALWAYS_VALID=0 are always set: validation really happens,
	// at full speed.
	Env []string
}

// Pebble is one pebble process and its DNS server, owned by a test. Its
// methods are safe for concurrent use.
type Pebble struct {
	// DirURL is the ACME directory, https://127.0.0.1:PORT/dir.
	DirURL string
	// RootFile is a PEM file of the certificate pebble's own HTTPS
	// presents (tls.acme.ca_root).
	RootFile string

	t       testing.TB
	bin     string
	conf    string
	addr    string // ACME listener
	mgmt    string // management listener
	dns     string // pebble-challtestsrv's DNS listener
	env     []string
	rootCAs *x509.CertPool

	mu   sync.Mutex
	proc *netutil.Process // nil while stopped
	logs []*netutil.LockedBuffer
}

// Start runs pebble-challtestsrv and pebble as opts says, waits until
// pebble answers its directory, and registers their cleanup.
func Start(t testing.TB, opts Options) *Pebble {
	t.Helper()
	bin := lookPath(t, "pebble")
	dns := startDNS(t, lookPath(t, "pebble-challtestsrv"))
	dir := t.TempDir()
	p := &Pebble{t: t, bin: bin, addr: netutil.FreeAddr(t), mgmt: netutil.FreeAddr(t), dns: dns}
	p.DirURL = "https://" + p.addr + "/dir"
	p.RootFile = filepath.Join(dir, "cert.pem")
	p.rootCAs = writeServerCert(t, dir)
	conf := map[string]any{"pebble": map[string]any{
		"listenAddress": p.addr, "managementListenAddress": p.mgmt,
		"certificate": p.RootFile, "privateKey": filepath.Join(dir, "key.pem"),
		"httpPort": opts.HTTPPort, "tlsPort": opts.TLSPort,
		"ocspResponderURL": "", "externalAccountBindingRequired": false,
		"certificateValidityPeriod": uint64(opts.Validity / time.Second),
	}}
	b, _ := json.Marshal(conf)
	p.conf = filepath.Join(dir, "pebble-config.json")
	if err := os.WriteFile(p.conf, b, 0o600); err != nil {
		t.Fatalf("pebble: %v", err)
	}
	p.env = append([]string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_VA_ALWAYS_VALID=0"}, opts.Env...)
	t.Cleanup(p.Stop)
	p.launch()
	return p
}

// lookPath finds name in PATH or skips (fails with RLPROXY_REQUIRE_TOOLS=1).
func lookPath(t testing.TB, name string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("RLPROXY_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%s not found in PATH and RLPROXY_REQUIRE_TOOLS=1 (apt-get install pebble): %v", name, err)
		}
		t.Skipf("skipping: %s not found in PATH (apt-get install pebble): %v", name, err)
	}
	return bin
}

// startDNS runs pebble-challtestsrv as a DNS server alone (its challenge
// listeners off) answering 127.0.0.1 to every A query and nothing to
// AAAA, and returns its address.
func startDNS(t testing.TB, bin string) string {
	t.Helper()
	addr := netutil.FreeAddr(t)
	cmd := exec.Command(bin, "-dns01", addr, "-http01", "", "-https01", "", "-tlsalpn01", "",
		"-management", netutil.FreeAddr(t), "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "")
	var log netutil.LockedBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	proc, err := netutil.Start(cmd)
	if err != nil {
		t.Fatalf("pebble-challtestsrv: %v", err)
	}
	t.Cleanup(proc.Kill)
	// It serves DNS over TCP too: accepting is being ready.
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := netutil.Poll(ctx, proc.Exited(), netutil.PollInterval, func() error { return netutil.Accepts(addr) }); err != nil {
		t.Fatalf("pebble-challtestsrv on %s did not start: %v\n%s", addr, err, log.String())
	}
	return addr
}

// launch starts pebble with the current environment and waits for its
// directory. The caller must not hold mu.
func (p *Pebble) launch() {
	p.t.Helper()
	cmd := exec.Command(p.bin, "-config", p.conf, "-dnsserver", p.dns)
	cmd.Env = append(os.Environ(), p.env...)
	log := &netutil.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	proc, err := netutil.Start(cmd)
	if err != nil {
		p.t.Fatalf("pebble: %v", err)
	}
	p.mu.Lock()
	p.proc, p.logs = proc, append(p.logs, log)
	p.mu.Unlock()
	client := p.client()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	err = netutil.Poll(ctx, proc.Exited(), netutil.PollInterval, func() error {
		resp, err := client.Get(p.DirURL)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	if err != nil {
		p.t.Fatalf("pebble on %s did not start: %v\n%s", p.addr, err, log.String())
	}
}

// client trusts pebble's own HTTPS certificate.
func (p *Pebble) client() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: p.rootCAs, MinVersion: tls.VersionTLS12},
	}}
}

// Stop kills pebble (its state, accounts and orders, is lost).
func (p *Pebble) Stop() {
	p.mu.Lock()
	proc := p.proc
	p.proc = nil
	p.mu.Unlock()
	if proc != nil {
		proc.Kill()
	}
}

// Restart stops pebble and starts it again on the same ports with env
// replacing Options.Env (pebble forgets its accounts, orders and roots).
func (p *Pebble) Restart(env ...string) {
	p.t.Helper()
	p.Stop()
	p.env = append([]string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_VA_ALWAYS_VALID=0"}, env...)
	p.launch()
}

// Log is everything the pebble processes of p wrote, in start order.
func (p *Pebble) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, l := range p.logs {
		b.WriteString(l.String())
	}
	return b.String()
}

// Orders counts the orders pebble created (RFC 8555 §7.4; its log line
// "There are now N orders in the db"), one per certificate ordered; a
// new-order request it refused is not one.
func (p *Pebble) Orders() int {
	n := 0
	for _, line := range strings.Split(p.Log(), "\n") {
		if strings.Contains(line, "There are now ") && strings.HasSuffix(line, " orders in the db") {
			n++
		}
	}
	return n
}

// Roots is a pool of the roots pebble issues under now (management API
// /roots/0): what a client trusting this CA trusts.
func (p *Pebble) Roots(t testing.TB) *x509.CertPool {
	t.Helper()
	resp, err := p.client().Get("https://" + p.mgmt + "/roots/0")
	if err != nil {
		t.Fatalf("pebble roots: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("pebble roots: %d %v: %s", resp.StatusCode, err, b)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("pebble roots: no PEM certificate in %q", b)
	}
	return pool
}

// writeServerCert writes a self-signed certificate for 127.0.0.1 and
// localhost (cert.pem, key.pem in dir) for pebble's own HTTPS and returns
// a pool trusting it.
func writeServerCert(t testing.TB, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("pebble cert: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "pebble test server"},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("pebble cert: %v", err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("pebble cert: %v", err)
	}
	for name, block := range map[string]*pem.Block{"cert.pem": {Type: "CERTIFICATE", Bytes: der}, "key.pem": {Type: "EC PRIVATE KEY", Bytes: kb}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatalf("pebble cert: %v", err)
		}
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// Addr is pebble's ACME listener, HOST:PORT.
func (p *Pebble) Addr() string { return p.addr }
