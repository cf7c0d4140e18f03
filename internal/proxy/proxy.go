// Package proxy is rlproxy's request path: it finds the client's real
// address, matches a route, asks the policy layer for a verdict, and then
// forwards the request (after its leaky-bucket wait, if any), or answers a
// refusal (429 + Retry-After), a limiter outage (503), an unknown route
// (404) or an upstream failure (502) — all as RFC 9457 problem+json from
// one place (problem.go).
package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"rlproxy/internal/config"
	"rlproxy/internal/logging"
	"rlproxy/internal/metrics"
	"rlproxy/internal/policy"
	"rlproxy/internal/realip"
)

// Runtime is everything one configuration needs on the request path. It is
// immutable; a reload builds a new Runtime and swaps it in atomically, so a
// request sees one configuration from start to end.
type Runtime struct {
	Config    *config.Config
	Limiter   *policy.Limiter
	realIP    *realip.Resolver
	upstreams map[string]*upstream // by route name
	transport []*directTransport
	quota     *quotaEndpoint
}

// Server is the public HTTP handler. The zero value is not usable; use New.
type Server struct {
	rt      atomic.Pointer[Runtime]
	metrics *metrics.Metrics
	log     *slog.Logger
	// refusal is swapped by reloads while requests read it.
	refusal atomic.Pointer[logging.RefusalSampler]
	waiting atomic.Int64 // requests currently held in delay
	results sync.Pool    // *policy.Result
}

// New returns a Server serving rt.
func New(rt *Runtime, m *metrics.Metrics, log *slog.Logger) *Server {
	s := &Server{metrics: m, log: log}
	s.results.New = func() any { return new(policy.Result) }
	s.Swap(rt)
	return s
}

// Swap makes rt the configuration for requests that start from now on and
// returns the previous one (whose idle upstream connections the caller may
// close once in-flight requests are done).
func (s *Server) Swap(rt *Runtime) *Runtime {
	prev := s.rt.Swap(rt)
	// A new sampler only when the rate changed: an unchanged one keeps its
	// second's budget and its count of suppressed lines across reloads.
	if prev == nil || s.refusal.Load() == nil || prev.Config.Log.RefusalsPerSecond != rt.Config.Log.RefusalsPerSecond {
		s.refusal.Store(logging.NewRefusalSampler(s.log, rt.Config.Log.RefusalsPerSecond))
	}
	return prev
}

// Runtime returns the configuration currently served.
func (s *Server) Runtime() *Runtime { return s.rt.Load() }

// Waiting returns the number of requests currently held in leaky-bucket delay.
func (s *Server) Waiting() int64 { return s.waiting.Load() }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt := s.rt.Load()
	peer := peerAddr(r.RemoteAddr)
	ip := rt.realIP.ClientIP(peer, r.Header)

	if rt.quota != nil && r.URL.Path == rt.quota.path {
		s.serveQuota(w, r, rt, ip)
		return
	}
	route := rt.Limiter.Match(r)
	if route == nil {
		writeProblem(w, r, problemNoRoute, nil, nil)
		return
	}
	up := rt.upstreams[route.Name]
	if t := rt.Config.Server.BodyTimeout; t > 0 && r.Body != nil && r.Body != http.NoBody {
		r = withIdleTimeoutBody(w, r, t)
	}
	if !route.Limited() {
		up.plain.ServeHTTP(w, r)
		return
	}

	res := s.results.Get().(*policy.Result)
	defer s.results.Put(res)
	start := time.Now()
	_ = rt.Limiter.Decide(r.Context(), route, r, ip, res)
	if s.metrics != nil {
		s.metrics.ObserveDecision(time.Since(start))
	}

	switch res.Outcome {
	case policy.Unavailable:
		writeProblem(w, r, problemUnavailable, nil, nil)
		return
	case policy.Refuse:
		setQuotaHeaders(w.Header(), rt.Config.Response.Headers, res)
		s.logRefusal(route, res)
		writeProblem(w, r, problemRateLimited, rt, res)
		return
	}
	setQuotaHeaders(w.Header(), rt.Config.Response.Headers, res)
	// Leases are held from the decision on: renewed through a leaky-bucket
	// wait too, and released even when the request is refused for waiting
	// too long or the client leaves during its wait.
	if res.HasLeases() {
		stop := s.renewLeases(rt.Limiter, res)
		defer rt.Limiter.Release(res)
		defer stop()
	}
	if res.Wait > 0 && !s.wait(w, r, rt, route, ip, res) {
		// Refunded by a shaping cap, or the client left while waiting.
		rt.Limiter.Settle(res, policy.Settlement{Status: statusClientClosed})
		return
	}
	if route.Settles() {
		s.forwardSettled(w, r, rt.Limiter, route, up.limited, res)
		return
	}
	up.limited.ServeHTTP(w, r)
}

// wait holds the request for res.Wait (leaky-bucket shaping, nginx
// limit_req without nodelay). It returns false when the request must not be
// forwarded: the client went away (never forwarded, as nginx: it stays
// charged), or the wait is beyond server.max_wait or server.max_waiting
// requests already wait — then it is refused with the refusal status, and
// since a refused request is charged by none, the charge its decision made
// is refunded first (policy.Limiter.Refund), so the refused requests leave
// no water in the bucket to delay the next ones.
func (s *Server) wait(w http.ResponseWriter, r *http.Request, rt *Runtime, route *policy.Route, ip netip.Addr, res *policy.Result) bool {
	d := time.Duration(res.Wait) * time.Millisecond
	srv := &rt.Config.Server
	if n := s.waiting.Add(1); d > srv.MaxWait || n > int64(srv.MaxWaiting) {
		s.waiting.Add(-1)
		// Refunded before answering: a client that retries on the answer
		// must find the bucket without this request in it.
		rt.Limiter.Refund(res)
		if s.metrics != nil {
			which := metrics.CapMaxWaiting
			if d > srv.MaxWait {
				which = metrics.CapMaxWait
			}
			s.metrics.ShapingRefusal(route.Name, which)
		}
		// The quota headers were set before the wait: describe the state
		// without this request again (a peek after the refund).
		peek := s.results.Get().(*policy.Result)
		defer s.results.Put(peek)
		if rt.Limiter.Peek(r.Context(), route, r, ip, peek) == nil {
			res = peek
			setQuotaHeaders(w.Header(), rt.Config.Response.Headers, res)
		}
		res.RetryAfter = d.Milliseconds()
		writeProblem(w, r, problemQueueFull, rt, res)
		return false
	}
	defer s.waiting.Add(-1)
	if s.metrics != nil {
		s.metrics.ObserveDelay(d)
		s.metrics.AddWaiting(1)
		defer s.metrics.AddWaiting(-1)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// renewLeases refreshes res's concurrency leases while the request runs.
func (s *Server) renewLeases(l *policy.Limiter, res *policy.Result) (stop func()) {
	every := res.LeaseRenewEvery()
	if every <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				l.Renew(ctx, res)
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (s *Server) logRefusal(route *policy.Route, res *policy.Result) {
	if s.log == nil || res.Binding < 0 {
		return
	}
	ok, suppressed := s.refusal.Load().Allow(time.Now())
	if !ok {
		return
	}
	it := &res.Items[res.Binding]
	s.log.Info("request refused",
		"route", route.Name,
		"policy", it.Policy.Name,
		"key", res.RedactedKeyFor(res.Binding),
		"decision", it.Status.String(),
		"retry_after_ms", res.RetryAfter,
		"suppressed", suppressed)
}

// peerAddr parses the TCP peer of r (unmapped, so ::ffff:10.0.0.1 is 10.0.0.1).
func peerAddr(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		a, _ := netip.ParseAddr(remote)
		return a.Unmap()
	}
	return ap.Addr().Unmap()
}
