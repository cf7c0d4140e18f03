package proxy

import (
	"net/http"
	"net/netip"
	"time"

	"rlproxy/internal/policy"
	"rlproxy/internal/reqview"
)

// The answers the request path gives in rlproxy's own name before
// forwarding: a request it cannot read (400), a method it never forwards
// (405), a refusal or an outage of the policies (429, 503) and a shaping
// cap (429). Their bodies are problem.go's (gRPC statuses: grpc.go), their
// quota headers headers.go's.

// refuse is Refuse on the proxy path: noted in the access log, and on
// HTTP/1 the connection closed after the answer, as nginx closes it after
// a 400 for a malformed request (what follows on it may be framed
// otherwise than the client meant).
func (s *Server) refuse(rc *record, r *http.Request, reason reqview.Reason) {
	rc.adm.decision = decisionBadRequest
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

// answerDecision answers a request its policies did not allow (a's
// decision): a refusal (response.status, with its quota headers) or an
// outage (503). An allowed request gets nothing here: its quota headers
// go on the final response (finalWriter), not on a 1xx before it.
func (s *Server) answerDecision(w http.ResponseWriter, r *http.Request, a *admission) {
	if a.res.Outcome == policy.Unavailable {
		writeProblem(w, r, problemUnavailable, nil, nil)
		return
	}
	setQuotaHeaders(w.Header(), a.rt.Config.Response.Headers, a.res)
	writeProblem(w, r, refusalProblem(a.res), a.rt, a.res)
}

// refusalProblem is the problem answering refusal res: its binding
// policy's reason (a ban, the penalty box) or its limit.
func refusalProblem(res *policy.Result) problemKind {
	if res.Binding >= 0 {
		switch res.Items[res.Binding].Refused {
		case policy.RefusedBan:
			return problemBanned
		case policy.RefusedPenalty:
			return problemPenalty
		}
	}
	return problemRateLimited
}

// answerCapped answers a request a shaping cap refused (its admission a,
// already refunded) with the refusal status. Its quota headers describe
// the state without this request (a peek after the refund), or the
// decision's if the peek fails; Retry-After is the wait it was refused.
func (s *Server) answerCapped(w http.ResponseWriter, r *http.Request, v *reqview.View, a *admission, ip netip.Addr) {
	res, rt := a.res, a.rt
	peek := s.results.Get().(*policy.Result)
	defer s.results.Put(peek)
	if rt.Limiter.Peek(r.Context(), a.route, v, ip, peek) == nil {
		res = peek
	}
	setQuotaHeaders(w.Header(), rt.Config.Response.Headers, res)
	res.RetryAfter = (time.Duration(a.res.Wait) * time.Millisecond).Milliseconds()
	writeProblem(w, r, problemQueueFull, rt, res)
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

// logRefusal logs a refusal by route's policies (res), at most
// log.refusals_per_second lines a second.
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
