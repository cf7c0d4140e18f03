// Package upstream owns rlproxy's upstream pools: the servers of each
// configured upstream with their own transports (idle connections and
// limits per server), the balancers that pick one per request (smooth
// weighted round robin, least_conn, consistent client hash), passive health
// (nginx max_fails/fail_timeout), active health checks, and retries of
// requests that could not be sent (nginx proxy_next_upstream error timeout).
//
// A Set lives as long as the process: each configuration (re)load asks it
// for the pools of the new config, and servers whose address and transport
// settings did not change are kept — their idle connections, health state
// and prober — so a reload never marks a down server up nor drops pooled
// connections.
package upstream

import (
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// Transport is one server's connection pool: a RoundTripper that Close
// shuts (idle connections closed, later ones closed when they go idle).
type Transport interface {
	http.RoundTripper
	Close()
}

// Server is one server of a pool. Its health is shared by every pool (of
// successive configurations) that holds it. Safe for concurrent use.
type Server struct {
	// Upstream is the configured upstream's name; Label is the server's
	// host:port (the default port made explicit), its metrics label.
	Upstream, Label string
	url             *url.URL
	transport       Transport
	key             string // identity across reloads (Set)

	inflight atomic.Int64 // requests sent and not finished (least_conn)

	// downUntil (Unix ns) is set while passive health holds the server out
	// of rotation; 0 = in rotation. Past it one trial request is let
	// through (claimTrial), as nginx does after fail_timeout.
	downUntil atomic.Int64
	// activeDown is the active health check's verdict.
	activeDown atomic.Bool

	mu       sync.Mutex
	fails    int   // failures in the current window
	lastFail int64 // Unix ns of the last failure

	prober *prober // nil without health_check; owned by the Set
}

// newServer returns the server at u (an http or https URL).
func newServer(upstream string, u *url.URL, tr Transport, key string) *Server {
	return &Server{Upstream: upstream, Label: hostPort(u), url: u, transport: tr, key: key}
}

// ServerLabel is the label of the server at u (Server.Label): its
// host:port, the scheme's default port made explicit.
func ServerLabel(u *url.URL) string { return hostPort(u) }

// hostPort is u's host:port with the scheme's default port made explicit.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// Up reports whether s is in rotation at now: neither the active check nor
// passive health holds it out.
func (s *Server) Up(now time.Time) bool {
	ok, _ := s.eligible(now.UnixNano())
	return ok
}

// eligible reports whether s may be picked at now (Unix ns); trial is true
// when passive health's fail_timeout has run out and s may take one trial
// request (to be claimed with claimTrial).
func (s *Server) eligible(now int64) (ok, trial bool) {
	if s.activeDown.Load() {
		return false, false
	}
	du := s.downUntil.Load()
	if du == 0 {
		return true, false
	}
	return now >= du, now >= du
}

// claimTrial makes this request the one trial after fail_timeout: the
// others skip s for another failTimeout meanwhile. False when another
// request claimed it first.
func (s *Server) claimTrial(now int64, failTimeout time.Duration) bool {
	du := s.downUntil.Load()
	return du != 0 && now >= du && s.downUntil.CompareAndSwap(du, now+int64(failTimeout))
}

// releaseTrial hands back the trial request claimTrial gave an attempt
// that then failed by the client's fault (blame): the next request may
// take it at once, as if this one had never been sent. claimed is
// downUntil as the claim left it (0: the attempt was no trial); a failure
// or success recorded since wins.
func (s *Server) releaseTrial(claimed, now int64) {
	if claimed != 0 {
		s.downUntil.CompareAndSwap(claimed, now)
	}
}

// failed records a failure at now (Unix ns): maxFails of them, each within
// failTimeout of the previous one, take s out of rotation for failTimeout
// (nginx counts its max_fails per fail_timeout the same way).
func (s *Server) failed(now int64, maxFails int, failTimeout time.Duration) (down bool) {
	if maxFails == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now-s.lastFail > int64(failTimeout) {
		s.fails = 0
	}
	s.fails++
	s.lastFail = now
	if s.fails < maxFails {
		return false
	}
	s.downUntil.Store(now + int64(failTimeout))
	return true
}

// succeeded records a success: a server back from passive down time (its
// trial request answered) is in rotation again with its count reset.
func (s *Server) succeeded() {
	if s.downUntil.Load() == 0 {
		return // the hot path: one atomic load
	}
	s.mu.Lock()
	s.fails = 0
	s.downUntil.Store(0)
	s.mu.Unlock()
}
