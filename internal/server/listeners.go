package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"rlproxy/internal/config"
	"rlproxy/internal/forwardauth"
	"rlproxy/internal/logging"
	"rlproxy/internal/metrics"
)

// listenPublic opens the public listener (over TLS when configured), or
// returns nil when it is off (listen: "": a decision service only).
func (a *App) listenPublic(cfg *config.Config) (net.Listener, error) {
	if cfg.Listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	// The connection cap and write deadlines wrap the TCP listener, under
	// TLS, so a refused connection costs no handshake (limits.go).
	a.lim = newLimitListener(ln, cfg.Server, metrics.NewListeners(a.reg).For("public"), a.log)
	a.lim.trust(cfg.RealIP.TrustedProxies)
	ln = a.lim
	a.hs.Handler = a.lim.streamDeadlines(a.hs.Handler)
	a.hs.ConnState = a.lim.trackState // idle connections give way at the cap (limits_conns.go)
	// PROXY protocol headers (the per-client cap counts their address),
	// then the raw request-head check (listener.go).
	ln = withFraming(a.lim.admitAfterProxy(withProxyProtocol(ln, cfg.Server.ProxyProtocol)), cfg)
	if cfg.TLS != nil {
		if err := a.loadCert(cfg.TLS); err != nil {
			ln.Close()
			return nil, err
		}
		ln = tls.NewListener(ln, a.listenerTLS())
	}
	return ln, nil
}

// startDecisionListeners opens the forward-auth and Envoy RLS listeners
// that cfg turns on (their changes take effect on restart, as listen's).
func (a *App) startDecisionListeners(cfg *config.Config) error {
	if addr := cfg.ForwardAuth.Listen; addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("forward_auth: listening on %s: %w", addr, err)
		}
		a.faLn = ln
		a.fa = &http.Server{
			Handler:           forwardauth.New(a.srv),
			ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
			IdleTimeout:       cfg.Server.IdleTimeout,
			MaxHeaderBytes:    cfg.Server.MaxHeaderBytes,
			ErrorLog:          logging.LibraryLog(a.log, slog.LevelDebug, "net/http"),
			// "OPTIONS *" gets the forward-auth handler's answer, not net/http's.
			DisableGeneralOptionsHandler: true,
		}
	}
	if addr := cfg.EnvoyRLS.Listen; addr != "" && a.rls != nil {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("envoy_rls: listening on %s: %w", addr, err)
		}
		a.rlsLn = ln
	}
	return nil
}

// serveDecisionListeners serves the listeners startDecisionListeners opened.
func (a *App) serveDecisionListeners() {
	if a.fa != nil {
		go func() { a.served <- a.fa.Serve(a.faLn) }()
	}
	if a.rlsLn != nil {
		go func() { a.served <- a.rls.Serve(a.rlsLn) }()
	}
}

// closeListeners closes whatever Start opened before it failed.
func (a *App) closeListeners() {
	a.stopACME()
	for _, ln := range []net.Listener{a.ln, a.faLn, a.rlsLn} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// shutdownDecisionListeners lets decisions in flight (and their
// leaky-bucket waits) finish before ctx is done.
func (a *App) shutdownDecisionListeners(ctx context.Context) {
	if a.fa != nil {
		if err := a.fa.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Warn("forward_auth shutdown", "err", err.Error())
		}
	}
	if a.rlsLn != nil {
		a.rls.Shutdown(ctx)
	}
}
