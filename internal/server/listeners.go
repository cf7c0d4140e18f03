package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"

	"rlproxy/internal/acme"
	"rlproxy/internal/admin"
	"rlproxy/internal/config"
	"rlproxy/internal/forwardauth"
	"rlproxy/internal/logging"
	"rlproxy/internal/metrics"
	"rlproxy/internal/reload"
)

// listeners is what Start opens: the public, admin and decision listeners
// and the reload watcher. Their addresses take effect on restart only
// (config.RestartOnly); the connection caps and TLS material reload.
type listeners struct {
	tls    atomic.Pointer[serverTLS] // the public listener's certificate and client CAs
	acme   *acme.Manager             // tls.acme's certificates and http_listen; nil without (acme.go)
	hs     *http.Server              // the public server; nil when listen is off
	ln     net.Listener
	eng    *engine        // server.engine auto: serves ln, hs serves what it hands over; nil on std
	lim    *limitListener // the public listener's connection cap and write timeout
	adm    *admin.Server
	fa     *http.Server // forward-auth; nil when off
	faLn   net.Listener
	rlsLn  net.Listener
	served chan error // the servers' ends

	watcher *reload.Watcher
	stop    func() // stops the watcher and SIGUSR1's handler
}

// listen opens every listener cfg turns on; on error the caller closes
// what was opened (closeListeners).
func (a *App) listen(cfg *config.Config) error {
	if err := a.listenPublic(cfg); err != nil {
		return err
	}
	if err := a.startACME(cfg); err != nil {
		return err
	}
	if err := a.startDecisionListeners(cfg); err != nil {
		return err
	}
	if cfg.AdminListen == "" {
		return nil
	}
	opts := []admin.Option{admin.WithLogger(a.log), admin.WithPage(a.pageSource()), admin.WithControl(a.controlSource())}
	if t := cfg.Admin.TLS; t != nil {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return fmt.Errorf("admin.tls: %w", err)
		}
		opts = append(opts, admin.WithTLS(&tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}))
	}
	// RLPROXY_PPROF=1 adds /debug/pprof/ to the admin listener
	// (docs/reference/config.md): opt-in, because profiles expose internals.
	if os.Getenv("RLPROXY_PPROF") == "1" {
		opts = append(opts, admin.WithPprof())
	}
	a.ls.adm = admin.New(cfg.AdminListen, a.metrics, func() bool { return a.srv.Runtime() != nil && !a.draining.Load() }, opts...)
	if err := a.ls.adm.Start(); err != nil {
		return fmt.Errorf("starting admin listener: %w", err)
	}
	return nil
}

// listenPublic opens the public listener (over TLS when configured) and
// its server, or nothing when it is off (listen: "": a decision service
// only).
func (a *App) listenPublic(cfg *config.Config) error {
	if cfg.Listen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	// The connection cap and write deadlines wrap the TCP listener, under
	// TLS, so a refused connection costs no handshake (limits.go).
	lim := newLimitListener(ln, cfg.Server, metrics.NewListeners(a.proc.reg).For("public"), a.log)
	lim.trust(cfg.RealIP.TrustedProxies)
	a.ls.lim = lim
	a.ls.hs = &http.Server{
		Handler:           lim.streamDeadlines(a.Handler()),
		ConnState:         lim.trackState, // idle connections give way at the cap (limits_conns.go)
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		MaxHeaderBytes:    cfg.Server.MaxHeaderBytes,
		ErrorLog:          logging.LibraryLog(a.log, slog.LevelDebug, "net/http"),
		Protocols:         publicProtocols(cfg),
		// "OPTIONS *" reaches the proxy, which refuses it (400, as nginx):
		// net/http would answer it itself, outside routes and metrics.
		DisableGeneralOptionsHandler: true,
	}
	// PROXY protocol headers (the per-client cap counts their address),
	// then the raw request-head check (listener.go) on std: the engine's
	// parser is stricter, and the check guards what it hands over.
	ln = lim.admitAfterProxy(withProxyProtocol(lim, cfg.Server.ProxyProtocol))
	if cfg.Server.Engine == config.EngineStd {
		ln = withFraming(ln, cfg)
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, a.listenerTLS())
	}
	a.ls.ln = ln
	if cfg.Server.Engine != config.EngineStd {
		a.ls.eng = a.newEngine(cfg, lim, ln.Addr())
		a.ls.hs.Handler = withConnTLS(a.ls.hs.Handler)
		a.ls.hs.ConnContext = connTLS
	}
	return nil
}

// startDecisionListeners opens the forward-auth and Envoy RLS listeners
// that cfg turns on (their changes take effect on restart, as listen's).
func (a *App) startDecisionListeners(cfg *config.Config) error {
	if addr := cfg.ForwardAuth.Listen; addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("forward_auth: listening on %s: %w", addr, err)
		}
		a.ls.faLn = ln
		a.ls.fa = &http.Server{
			Handler:           a.inGeneration(forwardauth.New(a.srv)),
			ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
			IdleTimeout:       cfg.Server.IdleTimeout,
			MaxHeaderBytes:    cfg.Server.MaxHeaderBytes,
			ErrorLog:          logging.LibraryLog(a.log, slog.LevelDebug, "net/http"),
			// "OPTIONS *" gets the forward-auth handler's answer, not net/http's.
			DisableGeneralOptionsHandler: true,
		}
	}
	if addr := cfg.EnvoyRLS.Listen; addr != "" && a.proc.rls != nil {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("envoy_rls: listening on %s: %w", addr, err)
		}
		a.ls.rlsLn = ln
	}
	return nil
}

// serve serves the listeners listen opened, each in its goroutine.
func (a *App) serve() {
	a.ls.served = make(chan error, 4)
	switch {
	case a.ls.eng != nil:
		go func() { a.ls.served <- a.ls.eng.serve(a.ls.ln) }()
		go func() { a.ls.served <- a.ls.hs.Serve(fallbackListener{a.ls.eng.std, a.ls.eng.srv.Limits}) }()
	case a.ls.hs != nil:
		go func() { a.ls.served <- a.ls.hs.Serve(a.ls.ln) }()
	}
	if a.ls.fa != nil {
		go func() { a.ls.served <- a.ls.fa.Serve(a.ls.faLn) }()
	}
	if a.ls.rlsLn != nil {
		go func() { a.ls.served <- a.proc.rls.Serve(a.ls.rlsLn) }()
	}
}

// closeListeners closes whatever Start opened before it failed.
func (a *App) closeListeners() {
	a.stopACME()
	for _, ln := range []net.Listener{a.ls.ln, a.ls.faLn, a.ls.rlsLn} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// shutdownDecisionListeners lets decisions in flight (and their
// leaky-bucket waits) finish before ctx is done.
func (a *App) shutdownDecisionListeners(ctx context.Context) {
	if a.ls.fa != nil {
		if err := a.ls.fa.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Warn("forward_auth shutdown", "err", err.Error())
		}
	}
	if a.ls.rlsLn != nil {
		a.proc.rls.Shutdown(ctx)
	}
}
