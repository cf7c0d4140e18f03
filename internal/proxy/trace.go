package proxy

import (
	"net/http"
	"net/url"

	"rlproxy/internal/config"
	"rlproxy/internal/policy"
	"rlproxy/internal/tracing"
	upstreampkg "rlproxy/internal/upstream"
)

// The request path's tracing hooks (package tracing). Each is called
// only when tracing is on (Server.tracer or the record's span set), so
// that off costs one nil check per hook.

// SetTracer makes t trace the requests served from now on (nil: none).
// Call it before serving: the field is read without synchronisation.
func (s *Server) SetTracer(t *tracing.Tracer) { s.tracer = t }

// traceStart starts r's server span, believing a traceparent only from a
// trusted proxy (real_ip.trusted_proxies, judged on the TCP peer), and
// makes the trace id the request id (requestid.go). It returns r
// carrying the span.
func (s *Server) traceStart(rc *record, r *http.Request, rt *Runtime) *http.Request {
	r, rc.trace = s.tracer.StartRequest(r, rt.realIP.Trusted(rc.view.Peer.Addr().Unmap()))
	rc.requestID = rc.trace.TraceID()
	return r
}

// traceEnd ends r's server span with what rc recorded.
func traceEnd(rc *record, r *http.Request, rt *Runtime) {
	if !rc.trace.Recording() {
		rc.trace.End(r.Method, nil)
		return
	}
	o := tracing.Outcome{
		Route: rc.route, Decision: rc.adm.decision, Policy: rc.adm.policy, WaitMS: rc.adm.waitMS, Client: rc.up.ClientIP,
		Status: rc.status, Server: rc.up.Server, Retries: rc.up.Retries,
	}
	if up := rt.upstreams[rc.route]; up != nil && up.pool != nil {
		o.Upstream = up.pool.Name
	}
	rc.trace.End(r.Method, &o)
}

// traceDecided records on rc's span the policies that decided res.
func traceDecided(rc *record, res *policy.Result) {
	if !rc.trace.Recording() {
		return
	}
	names := make([]string, len(res.Items))
	for i := range res.Items {
		names[i] = res.Items[i].Policy.Name
	}
	rc.trace.Decided(names)
}

// tracedTransport traces each attempt on one upstream server: a client
// span, whose context the server receives as traceparent.
type tracedTransport struct {
	upstreampkg.Transport
	tracer           *tracing.Tracer
	upstream, server string
}

// RoundTrip implements http.RoundTripper.
func (t *tracedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.tracer.RoundTrip(t.Transport, req, t.upstream, t.server)
}

// newServerTransport is newTransport, traced when tr is not nil.
func newServerTransport(u *config.Upstream, server *url.URL, tr *tracing.Tracer) (upstreampkg.Transport, error) {
	t, err := newTransport(u, server)
	if err != nil {
		return nil, err
	}
	if tr == nil {
		return t, nil
	}
	return &tracedTransport{Transport: t, tracer: tr, upstream: u.Name, server: upstreampkg.ServerLabel(server)}, nil
}
