package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	"rlproxy/internal/config"
	"rlproxy/internal/framing"
	"rlproxy/internal/h1"
)

// engine is the public listener's HTTP/1.1 engine (server.engine: auto,
// docs/ENGINE.md). The listener's guards stay where they are — the
// connection caps, PROXY protocol and TLS wrap the accepted connections
// as on std — and each accepted connection goes to srv.ServeConn. What
// the engine does not serve itself reaches the public net/http server,
// with the same handler and settings as on std, through one listener:
// TLS connections that negotiated "h2", cleartext ones that open with
// the HTTP/2 preface (server.h2c), and requests the handler hands over
// (ResponseWriter.HandOver) with the rest of their connection.
type engine struct {
	srv *h1.Server
	std *h1.Listener // srv.H2 and srv.Fallback, served by the public net/http server
}

// newEngine builds the engine for cfg's public listener at addr; lim is
// its connection cap, whose idle-first reclaim the engine's connections
// take part in.
func (a *App) newEngine(cfg *config.Config, lim *limitListener, addr net.Addr) *engine {
	s := cfg.Server
	e := &engine{std: h1.NewListener(addr)}
	e.srv = &h1.Server{
		Handler: a.engineHandler(),
		// One bound on the head, as net/http's: no line limit below it
		// (a 64 KiB credential is served on std).
		Limits:            h1.Limits{MaxHead: s.MaxHeaderBytes, MaxLine: s.MaxHeaderBytes},
		IdleTimeout:       s.IdleTimeout,
		ReadHeaderTimeout: s.ReadHeaderTimeout,
		// net/http bounds a TLS handshake by its shortest read or write
		// timeout, here read_header_timeout: the same bound.
		HandshakeTimeout: s.ReadHeaderTimeout,
		// The handler sets a request's own (h1.ResponseWriter.SetBodyTimeout)
		// from its generation: body_timeout reloads.
		BodyTimeout: s.BodyTimeout,
		// write_timeout stays the listener's (limitConn.Write), which
		// reloads; the engine arms no deadline of its own.
		Fallback: e.std,
		Refused:  a.srv.RefusedHead,
		ConnIdle: lim.engineState,
		Panicked: func(v any, stack []byte) {
			a.log.Error("panic serving a request", "panic", v, "stack", string(stack))
		},
	}
	if cfg.TLS != nil || s.H2C {
		e.srv.H2 = e.std
	}
	return e
}

// engineHandler serves each request the engine reads: the proxy's native
// path when package proxy has one (an h1.Handler), inside the generation
// current when the request began and closing the connection after it
// while draining, as Handler does on net/http; until then every request
// is handed over to net/http, so the engine is a strict parser in front
// of std's path.
func (a *App) engineHandler() h1.Handler {
	native, ok := any(a.srv).(h1.Handler)
	if !ok {
		return h1.HandlerFunc(handOver)
	}
	return h1.HandlerFunc(func(w *h1.ResponseWriter, r *h1.Request) {
		if a.draining.Load() && !r.Upgrade() {
			w.CloseAfter()
		}
		if g := a.gens.acquire(); g != nil {
			defer g.release()
		}
		native.ServeH1(w, r)
	})
}

// handOver gives every request to net/http.
func handOver(w *h1.ResponseWriter, _ *h1.Request) { _ = w.HandOver() }

// fallbackListener is the engine's listener for net/http. A connection
// handed over in HTTP/1 keeps the request-head guard of package framing
// for the requests net/http reads after it; one that speaks HTTP/2 (a
// *tls.Conn after ALPN "h2", the h2c preface) is passed as it is.
type fallbackListener struct {
	*h1.Listener
	limits h1.Limits // the engine's
}

// Accept implements net.Listener.
func (l fallbackListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if _, ok := c.(*tls.Conn); ok {
		return c, nil
	}
	fc := framing.Wrap(c, nil)
	fc.Check = l.strict()
	return fc, nil
}

// strict is the engine parser's verdict on a head, for the guard of a
// handed-over connection: the requests net/http reads after the one
// handed over are held to the rules the engine holds its own to
// (docs/ENGINE.md), so one handed-over request does not let a client
// leave them for the rest of its connection.
func (l fallbackListener) strict() func(head []byte) bool {
	var r h1.Request
	return func(head []byte) bool {
		_, why := h1.ParseRequest(head, &r, l.limits)
		return why == h1.OK
	}
}

// tlsStateKey holds a handed-over TLS connection's state in its requests'
// contexts.
type tlsStateKey struct{}

// connTLS is the public net/http server's ConnContext on auto: a TLS
// connection handed over by the engine reaches net/http under a wrapper
// (the replayed head), so net/http cannot see its TLS state; it is kept
// here for withConnTLS.
func connTLS(ctx context.Context, c net.Conn) context.Context {
	if fc, ok := c.(*framing.Conn); ok {
		c = fc.Conn
	}
	if st := h1.TLSState(c); st != nil {
		return context.WithValue(ctx, tlsStateKey{}, st)
	}
	return ctx
}

// withConnTLS sets r.TLS from connTLS's state, so everything that reads
// it — the request view, X-Forwarded-Proto, client-certificate key
// sources, tls.client_auth — sees a handed-over request as net/http's own.
func withConnTLS(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			if st, ok := r.Context().Value(tlsStateKey{}).(*tls.ConnectionState); ok {
				r.TLS = st
			}
		}
		h.ServeHTTP(w, r)
	})
}

// serve accepts ln's connections for the engine, each served in its
// goroutine, until ln is closed; a temporary accept error (file
// descriptors run out) is retried after a pause, as net/http's Serve does.
func (e *engine) serve(ln net.Listener) error {
	var pause time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return http.ErrServerClosed
			}
			if isTemporary(err) {
				pause = min(max(2*pause, 5*time.Millisecond), time.Second)
				time.Sleep(pause)
				continue
			}
			return err
		}
		pause = 0
		go e.srv.ServeConn(c)
	}
}

// isTemporary reports an accept error worth retrying (EMFILE, ENFILE,
// ECONNABORTED report Temporary).
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// shutdown stops the engine: ln (the public listener) is closed, idle
// connections close, requests in flight finish with "Connection: close",
// tunnels run until they end or ctx does. Connections handed to net/http
// are the public net/http server's to drain, after this (a request in
// flight here may still be handed over).
func (e *engine) shutdown(ctx context.Context, ln net.Listener) error {
	_ = ln.Close()
	return e.srv.Shutdown(ctx)
}
