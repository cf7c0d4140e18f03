// Package tlsutil holds the TLS helpers shared by the upstream transport
// and the Valkey client.
package tlsutil

import (
	"crypto/x509"
	"fmt"
	"os"
)

// CertPool returns the PEM certificates of caFile as a pool, or nil (the
// system roots) when caFile is empty. Errors: an unreadable file, or one
// with no PEM certificate.
func CertPool(caFile string) (*x509.CertPool, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca_file %s: no PEM certificate found", caFile)
	}
	return pool, nil
}
