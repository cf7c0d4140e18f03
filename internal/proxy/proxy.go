// Package proxy is rlproxy's request path: it finds the client's real
// address, matches a route, asks the policy layer for a verdict, and then
// forwards the request (after its leaky-bucket wait, if any), or answers a
// refusal (429 + Retry-After), a limiter outage (503), an unknown route
// (404) or an upstream failure (502) — all as RFC 9457 problem+json from
// one place (problem.go).
package proxy

import (
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rlproxy/internal/accesslog"
	"rlproxy/internal/adaptive"
	"rlproxy/internal/clientkey"
	"rlproxy/internal/config"
	"rlproxy/internal/h1"
	"rlproxy/internal/live"
	"rlproxy/internal/logging"
	"rlproxy/internal/metrics"
	"rlproxy/internal/policy"
	"rlproxy/internal/realip"
	"rlproxy/internal/reqview"
	"rlproxy/internal/tracing"
)

// Runtime is everything one configuration needs on the request path. It is
// immutable; a reload builds a new Runtime and swaps it in atomically, so a
// request sees one configuration from start to end.
type Runtime struct {
	Config    *config.Config
	Limiter   *policy.Limiter
	realIP    *realip.Resolver
	upstreams map[string]*upstream // by route name
	quota     *quotaEndpoint
	noRoute   *metrics.RouteTraffic     // route "-"
	redact    []string                  // query keys the access log never shows
	gates     map[string]*adaptive.Gate // by upstream name: those with adaptive_concurrency
	h1Pools   map[string]*h1.Pool       // by upstream name: the HTTP/1.1 engine's connections
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
	records sync.Pool    // *record
	access  atomic.Pointer[accesslog.Logger]

	// live is the admin page's live view; nil records nothing.
	live *live.Recorder
	// clients shows client ids in the refusal log as the admin page does.
	clients *clientkey.Display
	writers sync.Pool // *finalWriter
	// badRequests counts Refuse's answers by reason (OK's entry unused).
	badRequests [reqview.NumReasons]prometheus.Counter
	// tracer traces requests (trace.go); nil: tracing off.
	tracer *tracing.Tracer
	// natives pools the HTTP/1.1 engine path's per-request state
	// (*nativeCall, native.go).
	natives sync.Pool
	// sleep serves leaky-bucket waits (Hold); nil: real timers.
	sleep Sleep
}

// New returns a Server serving rt and counting into m (nil:
// metrics.Discard()).
func New(rt *Runtime, m *metrics.Metrics, log *slog.Logger) *Server {
	if m == nil {
		m = metrics.Discard()
	}
	s := &Server{metrics: m, log: log, clients: clientkey.NewDisplay()}
	s.results.New = func() any { return new(policy.Result) }
	s.records.New = func() any { return new(record) }
	s.writers.New = func() any { return new(finalWriter) }
	for r := reqview.OK + 1; r < reqview.NumReasons; r++ {
		s.badRequests[r] = m.BadRequests(r.String())
	}
	s.Swap(rt)
	m.SetAdaptive(func() []adaptive.State { return s.rt.Load().Overload(time.Now()) })
	return s
}

// SetSleep makes the leaky-bucket waits run on sleep (nil: real timers),
// the clock a test also decides at (server.Options.Sleep); call it before
// serving.
func (s *Server) SetSleep(sleep Sleep) { s.sleep = sleep }

// ClientDisplay is how the refusal log shows client ids; the admin page
// shows them the same way (one hash per client in both).
func (s *Server) ClientDisplay() *clientkey.Display { return s.clients }

// Swap makes rt the configuration for requests that start from now on and
// returns the previous one (whose idle upstream connections the caller may
// close once in-flight requests are done).
func (s *Server) Swap(rt *Runtime) *Runtime {
	prev := s.rt.Swap(rt)
	s.metrics.SetWaitingLimit(rt.Config.Server.MaxWaiting)
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

// peerAddr parses the TCP peer of r (unmapped, so ::ffff:10.0.0.1 is 10.0.0.1).
func peerAddr(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		a, _ := netip.ParseAddr(remote)
		return a.Unmap()
	}
	return ap.Addr().Unmap()
}
