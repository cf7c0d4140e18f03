package clientkey

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
)

// certField returns field (one of config.TLSFields) of the client
// certificate the TLS handshake verified, or "" (absent) when there is
// none: a plain connection, no certificate, or one that was not verified
// against tls.client_ca. Only a verified chain is identity: with
// tls.client_auth request, a certificate the handshake did not verify
// never gets here (the handshake fails), and PeerCertificates alone is
// never read.
//
//   - spki: the lower-case hex SHA-256 of the certificate's
//     SubjectPublicKeyInfo (RFC 7469 §2.4's pin, in hex): it survives a
//     renewal with the same key.
//   - subject: the subject distinguished name, RFC 4514 string.
//   - san:dns, san:uri, san:email: the first subject alternative name of
//     that type (RFC 5280 §4.2.1.6).
func certField(cs *tls.ConnectionState, field string) string {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return ""
	}
	leaf := cs.VerifiedChains[0][0]
	switch field {
	case "spki":
		sum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
		return hex.EncodeToString(sum[:])
	case "subject":
		return leaf.Subject.String()
	case "san:dns":
		if len(leaf.DNSNames) > 0 {
			return leaf.DNSNames[0]
		}
	case "san:uri":
		if len(leaf.URIs) > 0 {
			return leaf.URIs[0].String()
		}
	case "san:email":
		if len(leaf.EmailAddresses) > 0 {
			return leaf.EmailAddresses[0]
		}
	}
	return ""
}
