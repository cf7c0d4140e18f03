package server

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"rlproxy/internal/config"
	"rlproxy/internal/tlsutil"
)

// serverTLS is the public listener's TLS material of one load — its
// certificate, the client CAs (tls.client_ca) and the handshake
// configuration built from both — swapped whole on reload, so a handshake
// never pairs one load's CAs with another's client_auth.
type serverTLS struct {
	cert   *tls.Certificate
	caPEM  []byte // tls.client_ca's bytes; nil without client authentication
	crlPEM []byte // tls.client_crl's bytes; nil without
	conf   *tls.Config
}

// alpn is what the public listener offers: HTTP/2, then HTTP/1.1.
var alpn = []string{"h2", "http/1.1"}

// readTLS loads t's certificate and key and, when t asks for client
// certificates, its client CAs. Errors: the files' (a CA file without a PEM
// certificate too).
func readTLS(t *config.TLS) (*serverTLS, error) {
	cert, err := readCert(t)
	if err != nil {
		return nil, err
	}
	st := &serverTLS{cert: cert, conf: &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: alpn}}
	if cert != nil { // nil with tls.acme alone
		st.conf.Certificates = []tls.Certificate{*cert}
	}
	if t.ClientCA == "" || t.ClientAuth == config.ClientAuthNone {
		return st, nil
	}
	pem, err := os.ReadFile(t.ClientCA)
	if err != nil {
		return nil, fmt.Errorf("loading tls.client_ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("loading tls.client_ca %s: no PEM certificate in it", t.ClientCA)
	}
	st.caPEM, st.conf.ClientCAs = pem, pool
	if t.ClientCRL != "" {
		crl, err := tlsutil.LoadCRL(t.ClientCRL, t.ClientCA)
		if err != nil {
			return nil, err
		}
		st.conf.VerifyPeerCertificate, st.crlPEM = crl.Check, crl.File()
	}
	// request: a certificate given must verify (else the handshake fails),
	// none given is let in; it is never taken as identity unverified.
	st.conf.ClientAuth = tls.VerifyClientCertIfGiven
	if t.ClientAuth == config.ClientAuthRequire {
		st.conf.ClientAuth = tls.RequireAndVerifyClientCert
	}
	// Ticket keys of this load only: a resumed session carries the chain
	// verified at its full handshake, which must not outlive a change of
	// the CAs it was verified against.
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return nil, fmt.Errorf("session ticket key: %w", err)
	}
	st.conf.SetSessionTicketKeys([][32]byte{key})
	return st, nil
}

// filesChanged reports whether next holds another certificate, CA bundle
// or CRL than s: a reload of the TLS files under an unchanged config.
func (s *serverTLS) filesChanged(next *serverTLS) bool {
	return !bytes.Equal(leafDER(s.cert), leafDER(next.cert)) || !bytes.Equal(s.caPEM, next.caPEM) || !bytes.Equal(s.crlPEM, next.crlPEM)
}

// leafDER is c's leaf certificate, nil for no certificate (tls.acme alone).
func leafDER(c *tls.Certificate) []byte {
	if c == nil {
		return nil
	}
	return c.Certificate[0]
}

// listenerTLS is the public listener's tls.Config: each handshake takes
// the configuration of the latest load (with tls.acme's certificates).
func (a *App) listenerTLS() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: alpn,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if a.ls.acme != nil {
				return a.ls.acme.ConfigForClient(hello, a.ls.tls.Load().conf), nil
			}
			return a.ls.tls.Load().conf, nil
		},
	}
}
