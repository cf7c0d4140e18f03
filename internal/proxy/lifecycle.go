package proxy

import (
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"rlproxy/internal/accesslog"
	"rlproxy/internal/policy"
	"rlproxy/internal/reqview"
	upstreampkg "rlproxy/internal/upstream"
)

// A request's life, in the order it happens (docs/DESIGN.md draws it):
//
//	ServeHTTP   the record (response recorder, access-log account), the view, the trace span
//	serve       the client address, once
//	  route     400 unreadable, the quota endpoint, 405, 404: answered here
//	  prepare   upgrades screened, 413 for a declared body too large, limit_rate, body watch
//	  admit     the admission: decide (429, 503), wait (429 at a shaping cap), adaptive slot (503)
//	  forward   the upstream's answer through finalWriter (quota headers), or 502/504/408...
//	  finish    deferred: settle, stop lease renewal, release
//	end         deferred: metrics, the access log, the trace span, the record back to its pool

// ServeHTTP implements http.Handler, the std engine's adapter: it serves r
// through a record of its answer, then counts the answer (metrics) and
// logs it (access log).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc := s.records.Get().(*record)
	rc.reset(w, time.Now())
	var reason reqview.Reason
	rc.view, reason = reqview.Read(r) // the one view of r every reader shares
	rc.closeAfter = closesUnlessSwitched(r)
	rt := s.rt.Load()
	if s.tracer != nil {
		r = s.traceStart(rc, r, rt)
	}
	al := s.access.Load()
	if al != nil {
		rc.logging = true
		if rc.requestID == "" { // with tracing on, the trace id
			rc.requestID = requestID(r)
		}
	}
	// Deferred: a response that broke while streaming ends in
	// ReverseProxy's http.ErrAbortHandler panic, and is counted too.
	defer s.end(rc, r, rt, al)
	s.serve(rc, r, rt, reason)
}

// end counts rc's answer (the route's metrics), logs it (the access log
// al, nil for none; a client that left at debug), ends its trace span and
// pools rc.
func (s *Server) end(rc *record, r *http.Request, rt *Runtime, al *accesslog.Logger) {
	now := time.Now()
	rc.finish(rt, now)
	if r.Context().Err() != nil {
		s.clientLeft(rc, r, now)
	}
	if al != nil {
		s.logAccess(al, rc, rt, now)
	}
	if s.tracer != nil {
		traceEnd(rc, r, rt)
	}
	s.records.Put(rc)
}

// serve answers r, whose view is rc.view (read with reason): routed,
// prepared, admitted by its policies, forwarded, and finished by its
// admission whatever happens on the way.
func (s *Server) serve(rc *record, r *http.Request, rt *Runtime, reason reqview.Reason) {
	v := &rc.view
	ip := rt.realIP.ClientIP(v.Peer.Addr().Unmap(), v.Header)
	rc.up.ClientIP = ip
	route, up := s.route(rc, r, rt, reason)
	if up == nil {
		return
	}
	w, r, ok := s.prepare(rc, r, rt, up)
	if !ok {
		return
	}
	a := &rc.adm
	a.begin(s, rt, route)
	defer a.finish(rc)
	if !s.admit(rc, w, r, up, ip) {
		return
	}
	h := up.plain
	if a.res != nil {
		h = up.limited
	}
	s.forward(h, w, r, rt.Config.Response.Headers, a.res)
	a.answered()
}

// route returns r's route and its upstream, or answers r itself and
// returns a nil upstream: a request that cannot be read unambiguously
// (400: reason, from reqview.Read), the quota endpoint, TRACE and CONNECT
// (405), no route or a decision-service route (404), a credential of the
// route's key sources sent twice (400).
func (s *Server) route(rc *record, r *http.Request, rt *Runtime, reason reqview.Reason) (*policy.Route, *upstream) {
	v, ip := &rc.view, rc.up.ClientIP
	switch {
	case reason != reqview.OK:
		s.refuse(rc, r, reason)
		return nil, nil
	case rt.quota != nil && v.Path == rt.quota.path: // in any spelling, as routes
		rc.adm.decision = decisionQuota
		s.serveQuota(rc, r, v, rt, ip)
		return nil, nil
	case !screen(rc, r):
		return nil, nil
	}
	route := rt.Limiter.Match(v)
	switch {
	case route == nil:
		rc.adm.decision = decisionNoRoute
		writeProblem(rc, r, problemNoRoute, nil, nil)
		return nil, nil
	case route.Doubled(v):
		s.refuse(rc, r, reqview.DuplicateCredential)
		return nil, nil
	}
	up := rt.upstreams[route.Name]
	if up == nil { // a decision-service route (no upstream): the proxy has nowhere to send it
		writeProblem(rc, r, problemNoRoute, nil, nil)
		return nil, nil
	}
	rc.route, rc.traffic = route.Name, up.traffic
	return route, up
}

// prepare readies r for up: an untrusted peer's priority header removed,
// its Upgrade screened by the route's
// allowlist, the upstream exchange noted for the access log, limit_rate on
// the response, its body watched (body_timeout or stream_idle_timeout,
// max_body_size). It returns the writer and request to forward, or answers
// a declared body over max_body_size itself (413, before the policies
// charge anything) and returns false.
func (s *Server) prepare(rc *record, r *http.Request, rt *Runtime, up *upstream) (http.ResponseWriter, *http.Request, bool) {
	screenPriority(r, rt, rc.view.Peer.Addr().Unmap())
	if r.Header["Upgrade"] != nil {
		r = up.upgrades.screen(r)
	}
	if up.pool != nil && (rc.logging || s.tracer != nil || up.pool.NeedsClientIP() || up.gate != nil) {
		r = r.WithContext(upstreampkg.WithExchange(r.Context(), &rc.up))
	}
	if up.maxBody > 0 && r.ContentLength > up.maxBody {
		rc.adm.decision = decisionTooLarge
		refuseTooLarge(rc, r)
		return nil, nil, false
	}
	var w http.ResponseWriter = rc
	if up.rate > 0 {
		w = newRateWriter(w, r.Context(), up.rate, up.rateAfter)
	}
	if r.Body != nil && r.Body != http.NoBody {
		t := rt.Config.Server.BodyTimeout
		if isGRPC(r) { // a stream's messages may rightly pause
			t = rt.Config.Server.StreamIdleTimeout
		}
		r = withClientBody(w, r, t, up.streamLimit(r))
		rc.body = r.Body.(*clientBody)
	}
	return w, r, true
}

// admit decides r (its view rc.view, from client ip) by its admission
// rc.adm, serves the wait its policies granted, then waits for a slot at
// up's adaptive gate (overload.go). It returns false when r is not to be
// forwarded: refused (429), undecidable (503), refused at a shaping cap
// (429, refunded), shed (503, refunded) — answered here — or its client
// left while waiting.
func (s *Server) admit(rc *record, w http.ResponseWriter, r *http.Request, up *upstream, ip netip.Addr) bool {
	ctx, a, v := r.Context(), &rc.adm, &rc.view
	ok := a.decide(ctx, v, ip)
	if s.tracer != nil && a.res != nil {
		traceDecided(rc, a.res)
	}
	if !ok {
		s.answerDecision(w, r, a)
		return false
	}
	switch a.wait(ctx) {
	case capped:
		s.answerCapped(w, r, v, a, ip)
		return false
	case gone:
		return false
	}
	return s.acquireSlot(rc, w, r, up, ip)
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
