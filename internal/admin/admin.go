// Package admin serves rlproxy's operational endpoints on their own listener
// (docs/CONTRACT.md admin_listen, never the public port): /metrics, /healthz,
// /readyz, the admin page (page.go: GET /, /api/stats, /static/) and, when
// enabled, /debug/pprof/.
//
// /healthz means "the process serves HTTP" (a liveness probe). /readyz means
// "a config is loaded" (a readiness probe); store health is deliberately a
// metric (rlproxy_store_up), not readiness (docs/CONTRACT.md "Metrics"):
// a store outage is handled by each policy's on_store_error, and pulling
// every instance out of the load balancer at once would turn it into a
// total outage.
package admin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"rlproxy/internal/metrics"
)

// Server is the admin HTTP server. Build it with New, then Start; stop it
// with Shutdown.
type Server struct {
	addr string
	srv  *http.Server
	log  *slog.Logger
	ln   net.Listener // set by Start
	// loopback reports that ln is on a loopback address (set by Start),
	// which lets the admin page be served without basic_auth.
	loopback bool
	// tokens is admin.token_file as last read (access.go).
	tokens *tokenFile
	// tls, when set, serves the listener over TLS (WithTLS).
	tls *tls.Config
}

// Option configures a Server.
type Option func(*Server, *http.ServeMux)

// WithPprof adds the net/http/pprof handlers under /debug/pprof/. Profiles
// expose internals and cost CPU: enable only on a trusted admin address.
func WithPprof() Option {
	return func(_ *Server, mux *http.ServeMux) {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
}

// WithTLS serves the listener over TLS with c (admin.tls): bearer tokens
// and changes are then accepted off loopback.
func WithTLS(c *tls.Config) Option {
	return func(s *Server, _ *http.ServeMux) { s.tls = c }
}

// WithLogger logs serve errors to log (default: discarded).
func WithLogger(log *slog.Logger) Option {
	return func(s *Server, _ *http.ServeMux) { s.log = log }
}

// New returns a server for addr (host:port; port 0 picks a free one, see
// Addr) serving m's registry on /metrics, 200 "ok" on /healthz, and on
// /readyz 200 "ready" when ready() is true, else 503 "not ready". ready is
// called once per probe and must be safe for concurrent use.
func New(addr string, m *metrics.Metrics, ready func() bool, opts ...Option) *Server {
	mux := http.NewServeMux()
	s := &Server{addr: addr, log: slog.New(slog.DiscardHandler)}
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		plain(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready() {
			plain(w, http.StatusOK, "ready")
			return
		}
		plain(w, http.StatusServiceUnavailable, "not ready")
	})
	for _, o := range opts {
		o(s, mux)
	}
	s.tokens = &tokenFile{log: s.log}
	s.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		// No WriteTimeout: /debug/pprof/profile streams for ?seconds=N.
		IdleTimeout: 60 * time.Second,
	}
	return s
}

func plain(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	io.WriteString(w, body+"\n")
}

// Start listens on the address (so a port in use is an error here, not
// later) and serves in the background. It returns the listen error.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listening on admin address %s: %w", s.addr, err)
	}
	s.loopback = isLoopback(ln.Addr())
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	s.ln = ln
	go func() {
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin server stopped", "err", err)
		}
	}()
	return nil
}

// Addr is the address listened on (after Start), e.g. "127.0.0.1:9090".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Shutdown stops accepting connections and waits, until ctx is done, for
// in-flight requests (http.Server.Shutdown). It returns ctx's error if they
// did not finish in time.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.srv.Shutdown(ctx)
}

// Probe GETs url and returns nil if the answer is 200 within timeout, for
// container health checks: distroless images have no shell or curl, so the
// rlproxy binary probes itself (`rlproxy health -url …`). Errors name the URL
// and the status or transport failure.
func Probe(url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("probing %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probing %s: %w", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probing %s: status %d", url, resp.StatusCode)
	}
	return nil
}
