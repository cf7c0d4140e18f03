package proxy

import (
	"net/http"
	"net/netip"
	"strconv"

	"rlproxy/internal/config"
	"rlproxy/internal/policy"
	"rlproxy/internal/reqview"
)

// This file is the proxy path's decision, answers and headers offered to
// the decision interfaces (forward-auth, the Envoy rate limit service), so
// that they decide and answer exactly as the proxy does.

// ClientIP is the client address of a request from TCP peer with headers
// h, under real_ip (nginx realip rules: h is believed only from trusted
// proxies).
func (rt *Runtime) ClientIP(peer netip.Addr, h reqview.Headers) netip.Addr {
	return rt.realIP.ClientIP(peer, h)
}

// TrustedPeer reports whether peer is inside real_ip.trusted_proxies.
func (rt *Runtime) TrustedPeer(peer netip.Addr) bool { return rt.realIP.Trusted(peer) }

// PeerAddr parses a request's RemoteAddr ("IP:port") into the peer
// address, unmapped; the zero Addr when it does not parse.
func PeerAddr(remote string) netip.Addr { return peerAddr(remote) }

// Judge decides the request of view v, one another proxy describes rather
// than one to forward, on route for client ip, as ServeHTTP does; r is the
// request the answers are written for (its context bounds a wait, its path
// is a problem's instance). A refusal, an outage
// or a wait beyond the shaping caps is answered here (problem+json) and
// Judge returns false; an allowed request has its quota headers set and
// its leaky-bucket wait served, nothing written, and Judge returns true.
// The policies count it as on the proxy path. Concurrency leases are
// released at once: nothing tells Judge's caller when the request ends.
func (s *Server) Judge(w http.ResponseWriter, r *http.Request, v *reqview.View, rt *Runtime, route *policy.Route, ip netip.Addr) bool {
	if !route.Limited() {
		return true
	}
	var a admission
	a.begin(s, rt, route)
	defer a.finish(nil) // never answered: nothing to settle
	if !a.decide(r.Context(), v, ip) {
		s.answerDecision(w, r, &a)
		return false
	}
	setQuotaHeaders(w.Header(), rt.Config.Response.Headers, a.res)
	a.release()
	switch a.wait(r.Context()) {
	case capped:
		s.answerCapped(w, r, v, &a, ip)
		return false
	case gone:
		return false
	}
	return true
}

// WriteUntrustedCaller answers a decision listener's caller that is not
// inside real_ip.trusted_proxies: 403 problem+json, nothing decided.
func WriteUntrustedCaller(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, r, problemUntrustedCaller, nil, nil)
}

// WriteNotDescribed answers a forward-auth request that names no original
// request (no X-Forwarded-Uri nor X-Original-URI, or an unparsable one):
// 400 problem+json.
func WriteNotDescribed(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, r, problemNotDescribed, nil, nil)
}

// QuotaHeaders sets on h the header sets selects for res, as on every
// response of a limited route, plus Retry-After (delay-seconds, rounded up,
// at least 1) when res is a refusal: for a service that hands the headers
// to its caller (Envoy's response_headers_to_add).
func QuotaHeaders(h http.Header, sets config.HeaderSet, res *policy.Result) {
	setQuotaHeaders(h, sets, res)
	if res.Outcome == policy.Refuse {
		h[hdrRetryAfter] = []string{strconv.FormatInt(policy.CeilSeconds(res.RetryAfter), 10)}
	}
}
