package tlsutil

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// Revocations is a certificate revocation list (RFC 5280 §5) checked
// against: the serial numbers one CA revoked. The zero value revokes
// nothing. It is immutable and safe for concurrent use.
type Revocations struct {
	file    []byte          // the file's bytes, as read
	issuer  []byte          // the CRL issuer's DER-encoded name
	serials map[string]bool // revoked serial numbers, big.Int.String()
}

// File returns the CRL file's bytes as LoadCRL read them (a reload compares
// them to see whether the file changed).
func (r *Revocations) File() []byte { return r.file }

// LoadCRL reads the CRL in crlFile (PEM "X509 CRL" or DER) and checks that
// a CA of the PEM bundle caFile signed it. Errors: an unreadable or
// malformed file, or a CRL none of the CAs signed.
func LoadCRL(crlFile, caFile string) (*Revocations, error) {
	raw, err := os.ReadFile(crlFile)
	if err != nil {
		return nil, fmt.Errorf("reading client_crl: %w", err)
	}
	der := raw
	if b, _ := pem.Decode(raw); b != nil {
		der = b.Bytes
	}
	crl, err := x509.ParseRevocationList(der)
	if err != nil {
		return nil, fmt.Errorf("client_crl %s: %w", crlFile, err)
	}
	cas, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading client_ca: %w", err)
	}
	signed := false
	for rest := cas; !signed; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if ca, err := x509.ParseCertificate(b.Bytes); err == nil && crl.CheckSignatureFrom(ca) == nil {
			signed = true
		}
	}
	if !signed {
		return nil, fmt.Errorf("client_crl %s: not signed by a CA of client_ca", crlFile)
	}
	r := &Revocations{file: raw, issuer: crl.RawIssuer, serials: make(map[string]bool, len(crl.RevokedCertificateEntries))}
	for _, e := range crl.RevokedCertificateEntries {
		r.serials[e.SerialNumber.String()] = true
	}
	return r, nil
}

// ErrRevoked refuses a client certificate the CRL lists.
var ErrRevoked = errors.New("client certificate revoked")

// Check returns ErrRevoked when the leaf of a verified chain is one the
// list's issuer revoked; it is a tls.Config.VerifyPeerCertificate.
func (r *Revocations) Check(_ [][]byte, chains [][]*x509.Certificate) error {
	for _, ch := range chains {
		if len(ch) > 0 && bytes.Equal(ch[0].RawIssuer, r.issuer) && r.serials[ch[0].SerialNumber.String()] {
			return ErrRevoked
		}
	}
	return nil
}
