// Package forwardauth is rlproxy's forward-auth decision listener: the
// proxies already deployed (nginx auth_request, Traefik ForwardAuth, Caddy
// forward_auth) describe each request they receive in a request of their
// own, and rlproxy answers with its verdict, forwarding nothing.
//
// The described request is rebuilt from the forwarding headers: method,
// URI and host from X-Forwarded-Method, X-Forwarded-Uri and
// X-Forwarded-Host (Traefik, Caddy), else X-Original-Method and
// X-Original-URI (nginx's auth_request convention); the path of the
// forward-auth request itself is ignored, and every other header is the
// original's (key sources read them). The client address comes from
// real_ip.header under the proxy path's rules, the calling proxy being the
// TCP peer. Only callers inside real_ip.trusted_proxies are answered: the
// forwarding headers are believed from trusted proxies only, so any other
// caller gets 403 and is never decided.
//
// The described request is read as the proxy path reads a request
// (package reqview: method, target, Host, path normalization, a credential
// sent twice), and refused with 400 where the proxy path would refuse it.
// The verdict is the proxy path's (proxy.Server.Judge): routes match the
// described request, their policies decide it, and the answer is 200 with
// the quota headers and no body, or the refusal (response.status, or
// forward_auth.refused_status) with Retry-After, the quota headers and the
// problem+json body, or 503 when a fail-closed policy cannot be decided.
package forwardauth

import (
	"net/http"
	"net/url"
	"strings"

	"rlproxy/internal/proxy"
	"rlproxy/internal/reqview"
)

// The headers that describe the original request; they are not part of it.
const (
	hdrFwdMethod  = "X-Forwarded-Method" // Traefik, Caddy
	hdrFwdURI     = "X-Forwarded-Uri"
	hdrFwdHost    = "X-Forwarded-Host"
	hdrOrigMethod = "X-Original-Method" // nginx auth_request recipes
	hdrOrigURI    = "X-Original-Uri"    // X-Original-URI, canonical form
)

// Handler answers forward-auth requests with the verdict of the
// configuration the proxy server currently serves (reloads apply at once).
type Handler struct {
	srv *proxy.Server
}

// New returns the forward-auth handler deciding through srv.
func New(srv *proxy.Server) *Handler { return &Handler{srv: srv} }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt := h.srv.Runtime()
	peer := proxy.PeerAddr(r.RemoteAddr)
	if !rt.TrustedPeer(peer) {
		proxy.WriteUntrustedCaller(w, r)
		return
	}
	v, ans, ok := described(r)
	if !ok {
		proxy.WriteNotDescribed(w, r)
		return
	}
	// The described request is read as the proxy reads its own (package
	// reqview): a spelling the proxy would refuse is refused here too.
	if reason := reqview.Check(&v, r); reason != reqview.OK {
		h.srv.Refuse(w, ans, reason)
		return
	}
	route := rt.Limiter.Match(&v)
	if route == nil { // no route limits it: not this service's to refuse
		w.WriteHeader(http.StatusOK)
		return
	}
	if route.Doubled(&v) {
		h.srv.Refuse(w, ans, reqview.DuplicateCredential)
		return
	}
	ip := rt.ClientIP(peer, v.Header)
	out := w
	fa := rt.Config.ForwardAuth
	if fa.RefusedStatus != 0 && fa.RefusedStatus != rt.Config.Response.Status {
		out = &refusedStatus{ResponseWriter: w, from: rt.Config.Response.Status, to: fa.RefusedStatus}
	}
	if h.srv.Judge(out, ans, &v, rt, route, ip) {
		w.WriteHeader(http.StatusOK)
	}
}

// described returns the view of the original request r describes, and r
// as the answers name it (a shallow copy with the original's method and
// URL: a problem's instance is the original path); false when r names no
// parsable original URI. The view reads r's header fields in place, less
// those that describe the original; its peer and TLS state are r's.
func described(r *http.Request) (reqview.View, *http.Request, bool) {
	uri := r.Header.Get(hdrFwdURI)
	method := r.Header.Get(hdrFwdMethod)
	if uri == "" {
		uri = r.Header.Get(hdrOrigURI)
		if method == "" {
			method = r.Header.Get(hdrOrigMethod)
		}
	}
	if uri == "" {
		return reqview.View{}, nil, false
	}
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		return reqview.View{}, nil, false
	}
	orig, _ := reqview.Read(r) // r's peer, TLS state and protocol
	orig.Target, orig.Header = uri, originalHeaders(r.Header)
	if method != "" {
		orig.Method = method
	}
	if host := r.Header.Get(hdrFwdHost); host != "" {
		// A chain of proxies may have listed several: the first is the client's.
		host, _, _ = strings.Cut(host, ",")
		orig.RawHost = strings.TrimSpace(host)
	}
	ans := r.WithContext(r.Context())
	ans.Method, ans.URL, ans.RequestURI = orig.Method, u, uri
	return orig, ans, true
}

// originalHeaders is the original request's header fields: a forward-auth
// request's, less those describing the original (they are not part of it).
type originalHeaders http.Header

// describing reports whether name is one of the fields that describe the
// original request.
func describing(name string) bool {
	for _, k := range [...]string{hdrFwdMethod, hdrFwdURI, hdrFwdHost, hdrOrigMethod, hdrOrigURI} {
		if strings.EqualFold(name, k) {
			return true
		}
	}
	return false
}

// Get implements reqview.Headers.
func (h originalHeaders) Get(name string) (string, bool) {
	if describing(name) {
		return "", false
	}
	return reqview.StdHeaders(h).Get(name)
}

// Values implements reqview.Headers.
func (h originalHeaders) Values(name string, fn func(string) bool) {
	if !describing(name) {
		reqview.StdHeaders(h).Values(name, fn)
	}
}

// Each implements reqview.Headers.
func (h originalHeaders) Each(fn func(name, value string) bool) {
	reqview.StdHeaders(h).Each(func(name, value string) bool {
		return describing(name) || fn(name, value)
	})
}

// refusedStatus turns the refusal status (response.status) into
// forward_auth.refused_status; the problem body keeps the refusal's own.
type refusedStatus struct {
	http.ResponseWriter
	from, to int
}

func (w *refusedStatus) WriteHeader(code int) {
	if code == w.from {
		code = w.to
	}
	w.ResponseWriter.WriteHeader(code)
}
