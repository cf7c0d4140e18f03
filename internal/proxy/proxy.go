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

	"github.com/prometheus/client_golang/prometheus"

	"rlproxy/internal/accesslog"
	"rlproxy/internal/adaptive"
	"rlproxy/internal/clientkey"
	"rlproxy/internal/config"
	"rlproxy/internal/live"
	"rlproxy/internal/logging"
	"rlproxy/internal/metrics"
	"rlproxy/internal/policy"
	"rlproxy/internal/realip"
	"rlproxy/internal/reqview"
	upstreampkg "rlproxy/internal/upstream"
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

// ServeHTTP implements http.Handler: it serves r through a record of
// its answer, then counts the answer (metrics) and logs it (access log).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc := s.records.Get().(*record)
	rc.reset(w, time.Now())
	var reason reqview.Reason
	rc.view, reason = reqview.Read(r) // the one view of r every reader shares
	rc.closeAfter = closesUnlessSwitched(r)
	rt := s.rt.Load()
	al := s.access.Load()
	if al != nil {
		rc.logging, rc.requestID = true, requestID(r)
	}
	// Deferred: a response that broke while streaming ends in
	// ReverseProxy's http.ErrAbortHandler panic, and is counted too.
	defer func() {
		now := time.Now()
		rc.finish(rt, now)
		if r.Context().Err() != nil {
			s.clientLeft(rc, r, now)
		}
		if al != nil {
			s.logAccess(al, rc, rt, now)
		}
		s.records.Put(rc)
	}()
	s.serve(rc, r, rt, reason)
}

// clientLeft logs, at debug level, a request whose client closed the
// connection (or reset the HTTP/2 stream) before its answer was complete:
// one line, named as such, whatever the transport made of the cut.
func (s *Server) clientLeft(rc *record, r *http.Request, now time.Time) {
	if !s.log.Enabled(r.Context(), slog.LevelDebug) {
		return
	}
	s.log.Debug("client left before the response was complete",
		slog.String("route", rc.route), slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", rc.status), slog.Int64("bytes", rc.bytes),
		slog.Int64("duration_ms", now.Sub(rc.start).Milliseconds()))
}

// serve answers r, whose view is rc.view (read with reason), noting in rc
// what it decided.
func (s *Server) serve(rc *record, r *http.Request, rt *Runtime, reason reqview.Reason) {
	var w http.ResponseWriter = rc
	v := &rc.view
	ip := rt.realIP.ClientIP(v.Peer.Addr().Unmap(), v.Header)
	rc.up.ClientIP = ip

	route := s.route(rc, r, rt, ip, reason)
	if route == nil {
		return
	}
	up := rt.upstreams[route.Name]
	if up == nil { // a decision-service route (no upstream): the proxy has nowhere to send it
		writeProblem(w, r, problemNoRoute, nil, nil)
		return
	}
	rc.route, rc.traffic = route.Name, up.traffic
	screenPriority(r, rt)
	if r.Header["Upgrade"] != nil {
		r = up.upgrades.screen(r)
	}
	if up.pool != nil && (rc.logging || up.pool.NeedsClientIP() || up.gate != nil) {
		r = r.WithContext(upstreampkg.WithExchange(r.Context(), &rc.up))
	}
	if up.maxBody > 0 && r.ContentLength > up.maxBody {
		rc.decision = decisionTooLarge
		refuseTooLarge(w, r)
		return
	}
	if up.rate > 0 {
		w = newRateWriter(w, r.Context(), up.rate, up.rateAfter)
	}
	if r.Body != nil && r.Body != http.NoBody {
		t := rt.Config.Server.BodyTimeout
		if isGRPC(r) { // a stream's messages may rightly pause
			t = rt.Config.Server.StreamIdleTimeout
		}
		r = withClientBody(w, r, t, up.streamLimit(r))
	}
	if !route.Limited() {
		rc.decision = decisionUnlimited
		s.live.Observe(route, nil)
		if up.gate != nil { // adaptive_concurrency (overload.go)
			t, ok := s.acquireSlot(rc, w, r, rt, up, nil, ip, 0)
			if !ok {
				return
			}
			defer finishSlot(rc, t)
		}
		s.forward(up.plain, w, r, 0, nil)
		return
	}

	res := s.results.Get().(*policy.Result)
	defer s.results.Put(res)
	if !s.decide(w, r, v, rt, route, ip, res) {
		rc.decision = decisionUnavailable
		if res.Outcome == policy.Refuse {
			rc.decision = decisionRejected
			if res.Binding >= 0 {
				rc.policy = res.Items[res.Binding].Policy.Name
			}
		}
		return
	}
	// Leases are held from the decision on: renewed through a leaky-bucket
	// wait too, and released even when the request is refused for waiting
	// too long or the client leaves during its wait.
	if res.HasLeases() {
		stop := s.renewLeases(rt.Limiter, res)
		defer rt.Limiter.Release(res)
		defer stop()
	}
	rc.decision = decisionAllowed
	if res.Wait > 0 {
		rc.decision, rc.waitMS = decisionDelayed, res.Wait
		if !s.wait(w, r, v, rt, route, ip, res) {
			if rc.status != 0 { // refused by a shaping cap (else the client left)
				rc.decision = decisionRejected
			}
			// Refunded by a shaping cap, or the client left while waiting.
			rt.Limiter.Settle(res, policy.Settlement{Status: statusClientClosed})
			return
		}
	}
	if up.gate != nil { // adaptive_concurrency (overload.go)
		t, ok := s.acquireSlot(rc, w, r, rt, up, res, ip, time.Duration(res.Wait)*time.Millisecond)
		if !ok {
			return
		}
		defer finishSlot(rc, t)
	}
	if route.Settles() {
		s.forwardSettled(w, r, rt, route, up.limited, res)
		return
	}
	s.forward(up.limited, w, r, rt.Config.Response.Headers, res)
	refundTooLarge(rt.Limiter, r, res)
}

// refundTooLarge refunds res when r's body grew past max_body_size after
// the decision charged it: refused for its size, it is charged by none,
// as a request refused by a shaping cap. (r's Body is the clientBody
// withClientBody set: a type check, no context lookup.)
func refundTooLarge(l *policy.Limiter, r *http.Request, res *policy.Result) {
	if b, ok := r.Body.(*clientBody); ok && b.tooLarge.Load() {
		l.Refund(res)
	}
}

// route returns r's route, or answers r itself and returns nil: a request
// that cannot be read unambiguously (400: reason, from reqview.Read), the
// quota endpoint, TRACE and CONNECT (405), no route (404), a credential of
// the route's key sources sent twice (400).
func (s *Server) route(rc *record, r *http.Request, rt *Runtime, ip netip.Addr, reason reqview.Reason) *policy.Route {
	v := &rc.view
	if reason != reqview.OK {
		s.refuse(rc, r, reason)
		return nil
	}
	if rt.quota != nil && v.Path == rt.quota.path { // in any spelling, as routes
		rc.decision = decisionQuota
		s.serveQuota(rc, r, v, rt, ip)
		return nil
	}
	if !screen(rc, r) {
		return nil
	}
	route := rt.Limiter.Match(v)
	switch {
	case route == nil:
		rc.decision = decisionNoRoute
		writeProblem(rc, r, problemNoRoute, nil, nil)
	case route.Doubled(v):
		s.refuse(rc, r, reqview.DuplicateCredential)
		return nil
	}
	return route
}

// refuse is Refuse on the proxy path: noted in the access log, and on
// HTTP/1 the connection closed after the answer, as nginx closes it after
// a 400 for a malformed request (what follows on it may be framed
// otherwise than the client meant).
func (s *Server) refuse(rc *record, r *http.Request, reason reqview.Reason) {
	rc.decision = decisionBadRequest
	if r.ProtoMajor == 1 {
		rc.Header()["Connection"] = closeConn
	}
	s.Refuse(rc, r, reason)
}

// Refuse answers r, which cannot be read unambiguously for reason
// (package reqview), with 400 problem+json, counted in
// rlproxy_bad_requests_total.
func (s *Server) Refuse(w http.ResponseWriter, r *http.Request, reason reqview.Reason) {
	if c := s.badRequests[reason]; c != nil {
		c.Inc()
	}
	writeProblem(w, r, badRequestProblems[reason], nil, nil)
}

// badRequestProblems is the answer of each reqview.Reason.
var badRequestProblems = [reqview.NumReasons]problemKind{
	reqview.BadMethod:           problemBadMethod,
	reqview.BadTarget:           problemBadTarget,
	reqview.BadPath:             problemBadPath,
	reqview.BadHost:             problemBadHost,
	reqview.BadContentLength:    problemBadContentLength,
	reqview.DuplicateCredential: problemDuplicateCredential,
}

// decide asks route's policies about r (its view v) from client ip into res. It
// answers a refusal (response.status) or an outage (503) itself and
// returns false; for an allowed request it returns true and writes
// nothing: its quota headers go on the final response (finalWriter), not
// on a 1xx before it.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, v *reqview.View, rt *Runtime, route *policy.Route, ip netip.Addr, res *policy.Result) bool {
	start := time.Now()
	_ = rt.Limiter.Decide(r.Context(), route, v, ip, res)
	s.metrics.ObserveDecision(time.Since(start))
	s.live.Observe(route, res)
	switch res.Outcome {
	case policy.Unavailable:
		writeProblem(w, r, problemUnavailable, nil, nil)
		return false
	case policy.Refuse:
		setQuotaHeaders(w.Header(), rt.Config.Response.Headers, res)
		s.logRefusal(rt, route, res)
		writeProblem(w, r, problemRateLimited, rt, res)
		return false
	}
	return true
}

// screen answers TRACE and CONNECT with 405 — never forwarded, as nginx:
// TRACE would echo the client's cookies and credentials back, CONNECT is a
// forward proxy's — and reports whether r may go on; see also
// closeAfterFraming.
func screen(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodTrace || r.Method == http.MethodConnect {
		w.Header()["Allow"] = allowed
		writeProblem(w, r, problemMethod, nil, nil)
		return false
	}
	closeAfterFraming(w, r)
	return true
}

// allowed is the Allow header of a 405 for TRACE or CONNECT (RFC 9110 §15.5.6).
var allowed = []string{"GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"}

// closeAfterFraming closes the client connection after the response to a
// request whose framing RFC 9112 §6.1 makes suspect: one with
// Transfer-Encoding (net/http has already dropped a Content-Length sent
// with it, so both together are indistinguishable from chunked alone), and
// any HTTP/1.0 request (net/http ignores Transfer-Encoding there and reads
// no body, so a chunked body's bytes would be taken for the next request).
// No leftover byte is then ever read as another request — the smuggling
// gadget behind a front end that trusts Content-Length. On a plain
// listener package framing already answers both with 400 (as nginx), from
// the raw request head net/http does not keep; this rule covers the TLS
// listener, whose connections cannot be wrapped. Cost: one new connection
// per chunked upload and per HTTP/1.0 keep-alive request (≈ 120 µs on
// loopback, BenchmarkUploadFraming); nothing for the rest.
func closeAfterFraming(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 && (r.ProtoMinor == 0 || len(r.TransferEncoding) > 0) {
		w.Header()["Connection"] = closeConn
	}
}

var closeConn = []string{"close"}

// wait holds the request for res.Wait (leaky-bucket shaping, nginx
// limit_req without nodelay). It returns false when the request must not be
// forwarded: the client went away (never forwarded, as nginx: it stays
// charged), or the wait is beyond server.max_wait or server.max_waiting
// requests already wait — then it is refused with the refusal status, and
// since a refused request is charged by none, the charge its decision made
// is refunded first (policy.Limiter.Refund), so the refused requests leave
// no water in the bucket to delay the next ones.
func (s *Server) wait(w http.ResponseWriter, r *http.Request, v *reqview.View, rt *Runtime, route *policy.Route, ip netip.Addr, res *policy.Result) bool {
	d := time.Duration(res.Wait) * time.Millisecond
	srv := &rt.Config.Server
	if n := s.waiting.Add(1); d > srv.MaxWait || n > int64(srv.MaxWaiting) {
		s.waiting.Add(-1)
		// Refunded before answering: a client that retries on the answer
		// must find the bucket without this request in it.
		rt.Limiter.Refund(res)
		which := metrics.CapMaxWaiting
		if d > srv.MaxWait {
			which = metrics.CapMaxWait
		}
		s.metrics.ShapingRefusal(route.Name, which)
		// Describe the state without this request (a peek after the
		// refund), or the decision's if the peek fails.
		peek := s.results.Get().(*policy.Result)
		defer s.results.Put(peek)
		if rt.Limiter.Peek(r.Context(), route, v, ip, peek) == nil {
			res = peek
		}
		setQuotaHeaders(w.Header(), rt.Config.Response.Headers, res)
		res.RetryAfter = d.Milliseconds()
		writeProblem(w, r, problemQueueFull, rt, res)
		return false
	}
	defer s.waiting.Add(-1)
	return Hold(r.Context(), d, s.metrics)
}

// Hold waits d, a leaky-bucket turn the policies granted, counted in m's
// delay histogram and waiting gauge. It returns true when
// the wait is over, false when ctx ended first (the caller went away: the
// request is not forwarded, and stays charged, as with nginx).
func Hold(ctx context.Context, d time.Duration, m *metrics.Metrics) bool {
	m.ObserveDelay(d)
	m.AddWaiting(1)
	defer m.AddWaiting(-1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
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

func (s *Server) logRefusal(rt *Runtime, route *policy.Route, res *policy.Result) {
	if s.log == nil || res.Binding < 0 {
		return
	}
	showIPs := rt.Config.Admin.ShowClientIPs
	ok, suppressed := s.refusal.Load().Allow(time.Now())
	if !ok {
		return
	}
	it := &res.Items[res.Binding]
	s.log.Info("request refused",
		"route", route.Name,
		"policy", it.Policy.Name,
		"key", res.DisplayKeyFor(res.Binding, func(id string) string { return s.clients.Show(id, showIPs) }),
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
