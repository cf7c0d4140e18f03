package clientkey

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"net/netip"
	"net/url"
	"testing"

	"rlproxy/internal/config"
)

// TestCertFieldKeys: tls:FIELD sources read the verified chain's leaf —
// the SPKI pin (hex SHA-256), the RFC 4514 subject, the first SAN of each
// type — hashed as a credential, so a plans index matches the same value;
// a certificate only in PeerCertificates (not verified) or a missing field
// is absent and the key falls to the next source.
func TestCertFieldKeys(t *testing.T) {
	u, _ := url.Parse("spiffe://example.org/client-a")
	leaf := &x509.Certificate{
		RawSubjectPublicKeyInfo: []byte("a public key"),
		Subject:                 pkix.Name{CommonName: "client-a", Organization: []string{"Example"}},
		DNSNames:                []string{"a.clients.test", "b.clients.test"},
		URIs:                    []*url.URL{u},
		EmailAddresses:          []string{"a@clients.test"},
	}
	pin := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	verified := request("/")
	verified.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}}}
	unverified := request("/")
	unverified.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}
	bare := &x509.Certificate{Subject: pkix.Name{CommonName: "bare"}}
	noSAN := request("/")
	noSAN.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{bare}}}
	ip := netip.MustParseAddr("192.0.2.1")

	for _, c := range []struct {
		field, value string
	}{
		{"spki", hex.EncodeToString(pin[:])},
		{"subject", "CN=client-a,O=Example"},
		{"san:dns", "a.clients.test"},
		{"san:uri", "spiffe://example.org/client-a"},
		{"san:email", "a@clients.test"},
	} {
		e := newExtractor(t, config.KeySpec{}, false, "tls:"+c.field, "ip")
		if got := certField(verified.TLS, c.field); got != c.value {
			t.Errorf("tls:%s = %q, want %q", c.field, got, c.value)
		}
		id, sum, ok := e.CredentialKey(nil, verified, ip)
		checkSafe(t, string(id))
		if !ok || id[0] != 'h' {
			t.Errorf("tls:%s: id %q, want a hashed credential", c.field, id)
		}
		if sums := e.Credentials(nil, c.value); len(sums) != 1 || sums[0] != sum {
			t.Errorf("tls:%s: Credentials(%q) = %x, want the request's %x (a plans index must find it)", c.field, c.value, sums, sum)
		}
		if got := key(e, unverified, ip); got != "ip:192.0.2.1" {
			t.Errorf("tls:%s of an unverified certificate: %q, want the ip key", c.field, got)
		}
		if got := key(e, request("/"), ip); got != "ip:192.0.2.1" {
			t.Errorf("tls:%s over plain HTTP: %q, want the ip key", c.field, got)
		}
		if c.field != "subject" && c.field != "spki" { // every certificate has those
			if got := key(e, noSAN, ip); got != "ip:192.0.2.1" {
				t.Errorf("tls:%s of a certificate without it: %q, want the ip key", c.field, got)
			}
		}
	}
	// The same value in a header is another client (the source is hashed in).
	byHeader := newExtractor(t, config.KeySpec{}, false, "header:X-Subject")
	bySubject := newExtractor(t, config.KeySpec{}, false, "tls:subject")
	if key(byHeader, request("/", "X-Subject: CN=client-a,O=Example"), ip) == key(bySubject, verified, ip) {
		t.Error("header:X-Subject and tls:subject with one value gave one id, want two")
	}
}
