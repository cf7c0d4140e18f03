package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// mtlsCA is a certificate authority made for one test.
type mtlsCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var mtlsSerial = big.NewInt(100)

func mtlsKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newMTLSCA(t *testing.T, name string) *mtlsCA {
	t.Helper()
	key := mtlsKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &mtlsCA{cert: c, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf for cn: a server certificate for 127.0.0.1, or a
// client certificate with a DNS name and an e-mail address.
func (ca *mtlsCA) issue(t *testing.T, cn string, server bool) (tls.Certificate, *x509.Certificate) {
	t.Helper()
	key := mtlsKey(t)
	mtlsSerial.Add(mtlsSerial, big.NewInt(1))
	tmpl := &x509.Certificate{
		SerialNumber: new(big.Int).Set(mtlsSerial), Subject: pkix.Name{CommonName: cn, Organization: []string{"rlproxy test"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames: []string{cn + ".clients.test"}, EmailAddresses: []string{cn + "@clients.test"},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: c}, c
}

// writePair writes c's certificate and key as PEM files in dir.
func writePair(t *testing.T, dir string, c tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	keyDER, err := x509.MarshalECPrivateKey(c.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}))
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return certFile, keyFile
}

// writeFile replaces path's content by rename, so a reload never reads
// half a file.
func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// mtlsEnv is a running rlproxy with client certificates on, and the
// certificates of a test.
type mtlsEnv struct {
	in             *rlproxytest.Instance
	up             *rlproxytest.Upstream
	url, caFile    string
	roots          *x509.CertPool
	a, b, stranger tls.Certificate
	ca, other      *mtlsCA
}

// startMTLS runs rlproxy with client_auth auth; with revokeB, a CRL of
// the CA revokes client b's certificate (tls.client_crl).
func startMTLS(t *testing.T, auth string, revokeB bool) *mtlsEnv {
	t.Helper()
	dir := t.TempDir()
	e := &mtlsEnv{ca: newMTLSCA(t, "rlproxy test CA"), other: newMTLSCA(t, "another CA"), up: rlproxytest.NewUpstream(t)}
	srv, _ := e.ca.issue(t, "rlproxy", true)
	e.a, _ = e.ca.issue(t, "client-a", false)
	var bLeaf *x509.Certificate
	e.b, bLeaf = e.ca.issue(t, "client-b", false)
	e.stranger, _ = e.other.issue(t, "client-a", false) // the same name, another CA
	certFile, keyFile := writePair(t, dir, srv)
	e.caFile = filepath.Join(dir, "clients.pem")
	writeFile(t, e.caFile, e.ca.pem)
	e.roots = x509.NewCertPool()
	e.roots.AddCert(e.ca.cert)
	crl := ""
	if revokeB {
		der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
			Number: big.NewInt(1), ThisUpdate: time.Now().Add(-time.Minute), NextUpdate: time.Now().Add(time.Hour),
			RevokedCertificateEntries: []x509.RevocationListEntry{{SerialNumber: bLeaf.SerialNumber, RevocationTime: time.Now()}},
		}, e.ca.cert, e.ca.key)
		if err != nil {
			t.Fatal(err)
		}
		crl = filepath.Join(dir, "clients.crl")
		writeFile(t, crl, pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}))
		crl = fmt.Sprintf(", client_crl: %q", crl)
	}
	e.in = rlproxytest.Start(t, fmt.Sprintf(`
tls: { cert_file: %q, key_file: %q, client_ca: %q, client_auth: %s, client_headers: true%s }
upstreams: { app: { url: %q } }
policies:
  per_cert: { algorithm: fixed_window, limit: 2, window: 1m, key: tls:spki }
routes:
  - { name: api, match: { path_prefix: / }, upstream: app, policies: [per_cert] }
`, certFile, keyFile, e.caFile, auth, crl, e.up.URL))
	e.url = "https://" + e.in.App.Addr()
	return e
}

// client returns a client presenting cert (none when nil), on its own
// connections (no session shared between identities). It sends cert
// whatever CAs the server names (crypto/tls would otherwise send no
// certificate rather than one of another CA).
func (e *mtlsEnv) client(t *testing.T, cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: e.roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}, Timeout: 10 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// get sends GET / through c with header pairs; it returns the status, or
// 0 when the exchange failed (a refused handshake).
func (e *mtlsEnv) get(t *testing.T, c *http.Client, header ...string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.url+"/", nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestMTLSRequire: with client_auth require, a client without a
// certificate and one with a certificate of another CA are refused at the
// handshake; two valid certificates get a quota each under a tls:spki key;
// the subject and fingerprint headers the upstream sees are the verified
// certificate's, whatever the client sent in them.
func TestMTLSRequire(t *testing.T) {
	e := startMTLS(t, "require", false)
	if st := e.get(t, e.client(t, nil)); st != 0 {
		t.Errorf("no certificate: status %d, want the handshake refused", st)
	}
	if st := e.get(t, e.client(t, &e.stranger)); st != 0 {
		t.Errorf("a certificate of another CA: status %d, want the handshake refused", st)
	}
	ca, cb := e.client(t, &e.a), e.client(t, &e.b)
	forged := []string{"X-Client-Cert-Subject", "CN=admin", "X-Client-Cert-Fingerprint", "00ff"}
	got := []int{e.get(t, ca, forged...), e.get(t, ca), e.get(t, ca), e.get(t, cb), e.get(t, cb), e.get(t, cb)}
	if want := []int{200, 200, 429, 200, 200, 429}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("statuses a,a,a,b,b,b = %v, want %v (a quota of 2 per certificate)", got, want)
	}
	reqs := e.up.Requests()
	if len(reqs) != 4 {
		t.Fatalf("upstream saw %d requests, want 4", len(reqs))
	}
	sum := sha256.Sum256(e.a.Leaf.Raw)
	first := reqs[0].Header
	if s := first.Values("X-Client-Cert-Subject"); len(s) != 1 || s[0] != "CN=client-a,O=rlproxy test" {
		t.Errorf("upstream's X-Client-Cert-Subject = %q, want the verified [CN=client-a,O=rlproxy test]", s)
	}
	if f := first.Values("X-Client-Cert-Fingerprint"); len(f) != 1 || f[0] != hex.EncodeToString(sum[:]) {
		t.Errorf("upstream's X-Client-Cert-Fingerprint = %q, want the certificate's SHA-256 %s", f, hex.EncodeToString(sum[:]))
	}
}

// TestMTLSRequest: with client_auth request, a client without a
// certificate is served (keyed by ip, and no certificate headers reach the
// upstream even when it sends them), a certificate of another CA is still
// refused, never taken as identity.
func TestMTLSRequest(t *testing.T) {
	e := startMTLS(t, "request", false)
	if st := e.get(t, e.client(t, nil), "X-Client-Cert-Subject", "CN=client-a,O=rlproxy test"); st != 200 {
		t.Errorf("no certificate: status %d, want 200", st)
	}
	if st := e.get(t, e.client(t, &e.stranger)); st != 0 {
		t.Errorf("a certificate of another CA: status %d, want the handshake refused", st)
	}
	if st := e.get(t, e.client(t, &e.a)); st != 200 {
		t.Errorf("a valid certificate: status %d, want 200", st)
	}
	reqs := e.up.Requests()
	if len(reqs) != 2 {
		t.Fatalf("upstream saw %d requests, want 2", len(reqs))
	}
	if s, ok := reqs[0].Header["X-Client-Cert-Subject"]; ok {
		t.Errorf("upstream saw X-Client-Cert-Subject %q from a client without a certificate, want none", s)
	}
}

// TestMTLSReloadCA: replacing the client_ca file (config unchanged) is a
// reload: certificates of the new CA are accepted, those of the old one
// refused, on new connections.
func TestMTLSReloadCA(t *testing.T) {
	e := startMTLS(t, "require", false)
	if st := e.get(t, e.client(t, &e.a)); st != 200 {
		t.Fatalf("before: status %d, want 200", st)
	}
	writeFile(t, e.caFile, e.other.pem)
	waitfor.True(t, "the new CA's certificate accepted after the CA file changed", func() bool { return e.get(t, e.client(t, &e.stranger)) == 200 })
	if st := e.get(t, e.client(t, &e.a)); st != 0 {
		t.Errorf("the old CA's certificate after the reload: status %d, want the handshake refused", st)
	}
}

// TestMTLSRevoked: a certificate the client_crl lists is refused at the
// handshake; another of the same CA is served.
func TestMTLSRevoked(t *testing.T) {
	e := startMTLS(t, "require", true)
	if st := e.get(t, e.client(t, &e.a)); st != 200 {
		t.Errorf("a certificate not revoked: status %d, want 200", st)
	}
	if st := e.get(t, e.client(t, &e.b)); st != 0 {
		t.Errorf("a revoked certificate: status %d, want the handshake refused", st)
	}
}
