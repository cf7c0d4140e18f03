package server

import (
	"crypto/tls"

	"rlproxy/internal/acme"
	"rlproxy/internal/config"
)

// startACME obtains and renews tls.acme's certificates in the background
// (package acme) once the public listener is open, and opens its
// http_listen. A CA that refuses never stops a listener; tls.acme's
// changes take effect on restart.
func (a *App) startACME(cfg *config.Config) error {
	if cfg.TLS == nil || cfg.TLS.ACME == nil {
		return nil
	}
	m, err := acme.New(cfg.TLS.ACME, acme.Options{
		Log: a.log, Registerer: a.proc.reg, Valkey: cfg.Store.Valkey,
		PublicAddr: a.Addr(), Static: a.staticCert,
	})
	if err != nil {
		return err
	}
	a.ls.acme = m
	return m.Start()
}

// staticCert is tls.cert_file's certificate of the latest load (nil without).
func (a *App) staticCert() *tls.Certificate {
	if st := a.ls.tls.Load(); st != nil {
		return st.cert
	}
	return nil
}

// ACMEHTTPAddr is tls.acme.http_listen's address once Start has returned,
// or "" when off.
func (a *App) ACMEHTTPAddr() string {
	if a.ls.acme == nil {
		return ""
	}
	return a.ls.acme.HTTPAddr()
}

// stopACME stops obtaining and renewing and closes http_listen.
func (a *App) stopACME() {
	if a.ls.acme != nil {
		a.ls.acme.Close()
	}
}
