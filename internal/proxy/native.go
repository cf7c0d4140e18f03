package proxy

import (
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"rlproxy/internal/h1"
	"rlproxy/internal/policy"
	"rlproxy/internal/reqview"
	upstreampkg "rlproxy/internal/upstream"
)

// The HTTP/1.1 engine's path (package h1): the same request life as
// ServeHTTP's (lifecycle.go) — the view, the client address once, the
// route, the admission (decide, wait, finish), the record counted and
// logged — with the request forwarded by the engine's own connections
// (native_forward.go) and rlproxy's answers written as h1 heads
// (native_answers.go), without a header map or an allocation per request.
// What it does not serve it hands to net/http (ServeHTTP) before anything
// is decided, so nothing is charged twice: see handOver.

// nativeCall is one request's state on the engine's path, pooled by the
// Server: the shared record (status, bytes, admission, view, upstream
// exchange), the upstream trip, the edits of both heads, buffers.
type nativeCall struct {
	rc   record
	ans  answerWriter // rlproxy's own answers, as net/http writers write them
	req  http.Request // the request those answers are written for (native_answers.go)
	url  url.URL
	hdr  http.Header
	idv  [1]string
	trip upstreampkg.Trip

	edits, back, none h1.Edits
	newID             bool // rc.requestID is new: the upstream gets it too
	set               []h1.FieldEdit
	drop              []string
	vals              []byte // the values of edits.Set, in place
	id                [32]byte
	buf               []byte // the body copy buffer

	// What the response said, for the admission's settlement.
	costN   int64
	hasCost bool
	stream  bool // text/event-stream: not a latency sample
	left    bool // the client left before the response was complete
	cut     bool // the upstream answered before taking the whole body: its connection closes
}

// ServeH1 implements h1.Handler: the engine's path for r. A request it
// does not serve (handOver) goes to net/http as it came (ServeHTTP).
func (s *Server) ServeH1(w *h1.ResponseWriter, r *h1.Request) {
	rt := s.rt.Load()
	n, _ := s.natives.Get().(*nativeCall)
	if n == nil {
		n = &nativeCall{hdr: http.Header{}, buf: make([]byte, copyBufSize)}
	}
	defer s.natives.Put(n)
	rc := &n.rc
	rc.reset(&n.ans, time.Now())
	n.newID, n.hasCost, n.stream, n.left, n.cut = false, false, false, false, false
	n.ans.reset(w)
	reason := readView(&rc.view, r)
	var route *policy.Route
	var up *upstream
	if reason == reqview.OK {
		if s.handOver(rt, r, &rc.view) {
			handOff(w)
			return
		}
		if route = rt.Limiter.Match(&rc.view); route != nil {
			up = rt.upstreams[route.Name]
			if up == nil || up.native == nil || !nativeRequest(r, up) {
				handOff(w)
				return
			}
		}
	}
	if r.Framing != h1.NoBody {
		w.SetBodyTimeout(rt.Config.Server.BodyTimeout) // this generation's, reloaded
	}
	al := s.access.Load()
	if al != nil {
		rc.logging = true
		rc.requestID = n.requestID(r)
	}
	n.answerRequest(r)
	s.serveH1(n, w, r, rt, reason, route, up)
	now := time.Now()
	rc.finish(rt, now)
	if n.left {
		s.clientLeft(rc, &n.req, now)
	}
	if al != nil {
		s.logAccess(al, rc, rt, now)
	}
}

// handOff hands the request to net/http; a server without that fallback
// (a misconfiguration of its listener) answers 500 and closes.
func handOff(w *h1.ResponseWriter) {
	if w.HandOver() == nil {
		return
	}
	w.CloseAfter()
	head := h1.AppendStatusLine(w.Scratch(), http.StatusInternalServerError, "Internal Server Error")
	head = h1.AppendField(h1.AppendField(head, "Connection", "close"), "Content-Length", "0")
	_ = w.WriteHead(append(head, "\r\n"...), h1.NoBody, 0)
}

// readView fills v from r, as reqview.Read does for net/http's request,
// and returns the Reason r is refused with (OK: none): Resolve's, or a
// repeated Authorization field (reqview.Check; the engine's parser has
// checked Content-Length).
func readView(v *reqview.View, r *h1.Request) reqview.Reason {
	*v = reqview.View{Method: r.Method(), Target: r.Target(), RawHost: r.Host(), Proto: r.Proto(),
		Header: &r.Header, Peer: r.Peer, TLS: r.TLS}
	if reason := v.Resolve(); reason != reqview.OK {
		return reason
	}
	if _, n := only(&r.Header, "Authorization"); n > 1 {
		return reqview.DuplicateCredential
	}
	return reqview.OK
}

// handOver reports whether r (of view v) goes to net/http whatever its
// route: tracing on, an Upgrade (the route's upgrades allowlist and the
// tunnel), gRPC, the quota endpoint, TRACE and CONNECT (net/http's path
// answers 405), a target other than a path (absolute form), an HTTP/1.0
// request without Host, a forwarding field spelled with "_" (the std
// path drops it: dropForwardingAliases).
func (s *Server) handOver(rt *Runtime, r *h1.Request, v *reqview.View) bool {
	t := v.Target
	switch {
	case s.tracer != nil, v.RawHost == "", len(t) == 0 || t[0] != '/':
		return true
	case rt.quota != nil && v.Path == rt.quota.path:
		return true
	case v.Method == http.MethodTrace || v.Method == http.MethodConnect:
		return true
	}
	hand := false
	r.Each(func(name, value string) bool {
		switch {
		case len(name) == 7 && strings.EqualFold(name, "upgrade"):
			hand = true
		case len(name) == 12 && strings.EqualFold(name, "content-type"):
			hand = strings.HasPrefix(value, "application/grpc")
		case strings.IndexByte(name, '_') >= 0:
			hand = forwardingAlias(name)
		}
		return !hand
	})
	return hand
}

// forwardingAlias reports whether name is one of forwardingFields spelled
// with "_" for "-".
func forwardingAlias(name string) bool {
	for _, f := range forwardingFields {
		if len(name) == len(f) && sameFieldName(name, f) {
			return true
		}
	}
	return false
}

// nativeRequest reports whether the engine's path can forward r to up: a
// chunked body on a route with max_body_size (held to the limit as it
// streams) is left to net/http.
func nativeRequest(r *h1.Request, up *upstream) bool {
	return !(r.Framing == h1.Chunked && up.maxBody > 0)
}

// serveH1 is serve for the engine: the client address once, the refusals
// before the policies (400, 404, 413), the admission, the forward.
func (s *Server) serveH1(n *nativeCall, w *h1.ResponseWriter, r *h1.Request, rt *Runtime, reason reqview.Reason, route *policy.Route, up *upstream) {
	rc, v := &n.rc, &n.rc.view
	ip := rt.realIP.ClientIP(v.Peer.Addr().Unmap(), v.Header)
	rc.up.ClientIP = ip
	switch {
	case reason != reqview.OK:
		s.refuse(rc, &n.req, reason)
		n.ans.flush(w)
		return
	case route == nil:
		rc.adm.decision = decisionNoRoute
		writeProblem(rc, &n.req, problemNoRoute, nil, nil)
		n.ans.flush(w)
		return
	case route.Doubled(v):
		s.refuse(rc, &n.req, reqview.DuplicateCredential)
		n.ans.flush(w)
		return
	}
	rc.route, rc.traffic = route.Name, up.traffic
	if up.maxBody > 0 && r.Framing == h1.Length && r.Length > up.maxBody {
		rc.adm.decision = decisionTooLarge
		refuseTooLarge(rc, &n.req)
		n.ans.flush(w)
		return
	}
	a := &rc.adm
	a.begin(s, rt, route)
	defer a.finish(n)
	if !s.admitH1(n, w, ip) {
		return
	}
	if s.forwardH1(n, w, r, rt, up) {
		a.answered()
	}
}

// admitH1 is admit for the engine: decide, wait. Routes whose policies
// may hold a request in a wait are net/http's (mayWait): the engine reads
// nothing while it serves a request, so it would not see a client leave
// during its wait.
func (s *Server) admitH1(n *nativeCall, w *h1.ResponseWriter, ip netip.Addr) bool {
	rc, a := &n.rc, &n.rc.adm
	ctx := n.req.Context()
	if !a.decide(ctx, &rc.view, ip) {
		s.answerDecision(rc, &n.req, a)
		n.ans.flush(w)
		return false
	}
	switch a.wait(ctx) {
	case capped:
		s.answerCapped(rc, &n.req, &rc.view, a, ip)
		n.ans.flush(w)
		return false
	case gone:
		return false
	}
	return true
}

// finalStatus implements response (the record's).
func (n *nativeCall) finalStatus() int { return n.rc.finalStatus() }

// cost implements response: the cost header's value the response carried
// in its head or trailer (read as it passed).
func (n *nativeCall) cost(string) (int64, bool) { return n.costN, n.hasCost }

// bodyTooLarge implements response: a body held to max_body_size as it
// streams is handed to net/http, so none grows past it here.
func (n *nativeCall) bodyTooLarge() bool { return false }

// sampled implements response as the record's sampled does.
func (n *nativeCall) sampled() bool {
	return n.rc.up.Status != 0 && n.rc.up.Status < 500 && !n.stream
}
