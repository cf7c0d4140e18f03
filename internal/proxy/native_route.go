package proxy

import (
	"strings"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/config"
	"rlproxy/internal/h1"
)

// nativeRoute is what the HTTP/1.1 engine's path (native.go) needs of one
// route beyond its upstream, prepared once per configuration; nil on an
// upstream struct when the route has a feature that path leaves to
// net/http (nativeSupports).
type nativeRoute struct {
	pool *h1.Pool // the upstream's connections, shared by its routes
	host string   // a literal upstreams.NAME.host; "" for client or upstream
	// hostUpstream sends each server's own host[:port] as Host.
	hostUpstream bool
	// Which forwarding fields rlproxy sets: each is off when the
	// upstream's request_headers removes or sets it (theirs wins, as on
	// the std path, where request_headers applies after them).
	xff, xfh, xfp, xri bool
	reqDrop            []string       // Forwarded, request_headers.remove
	reqSet             []h1.FieldEdit // request_headers.set
	// plainDrop and limitedDrop are the response fields dropped: the
	// upstream's response_headers.remove, and on a limited response the
	// upstream's own quota fields too (ours replace them).
	plainDrop, limitedDrop []string
	respSet                []h1.FieldEdit // response_headers.set
	errs                   errCounters
	fails                  *failureLog
	readExpired            func() // counts and logs a response cut by its read bound
}

// newH1Pool returns the engine's connection pool for upstream u, with
// the std transport's bounds (newTransport): the dial bound,
// response_header_timeout, read_timeout, 1024 idle connections per
// server, 90 s idle.
func newH1Pool(u *config.Upstream) *h1.Pool {
	return &h1.Pool{
		DialTimeout: dialTimeout, HeaderTimeout: u.ResponseHeaderTimeout, ReadTimeout: u.ReadTimeout,
		MaxIdle: 1024, IdleTimeout: 90 * time.Second,
		Limits: h1.Limits{MaxHead: maxResponseHeaderBytes},
	}
}

// nativeSupports reports whether the engine's path serves route r's
// requests to upstream u (or hands every one of them to net/http): a
// cleartext HTTP/1.1 upstream with servers, the request target forwarded
// as sent (no path or query in the upstream URL, no strip_prefix or
// rewrite), no limit_rate, no adaptive concurrency, no client
// certificate headers, no Host in request_headers, no policy that may
// hold a request in a leaky-bucket wait (mayWait).
func nativeSupports(cfg *config.Config, u *config.Upstream, r *config.Route, up *upstream) bool {
	switch {
	case up.pool == nil || !up.pool.Cleartext() || u.Protocol == config.ProtocolH2C:
		return false
	case u.URL == nil || strings.TrimSuffix(u.URL.EscapedPath(), "/") != "" || u.URL.RawQuery != "":
		return false
	case r == nil || r.StripPrefix != "" || r.Rewrite != "":
		return false
	case up.rate > 0 || up.gate != nil || cfg.TLS != nil && cfg.TLS.ClientHeaders || mayWait(cfg, r):
		return false
	}
	return !names(u.RequestHeaders, "Host")
}

// mayWait reports whether route r's requests may be held in a
// leaky-bucket wait (a leaky_bucket policy without nodelay; with a plan,
// any such policy of the file): net/http's path serves those, since it
// notices a client that leaves while it waits (not forwarded, settled as
// 499), and the engine reads nothing while a request is served.
func mayWait(cfg *config.Config, r *config.Route) bool {
	delays := func(name string) bool {
		p := cfg.Policies[name]
		return p != nil && (delaying(p.Limit) || p.Fallback != nil && delaying(*p.Fallback))
	}
	if r.Plan != "" {
		for name := range cfg.Policies {
			if delays(name) {
				return true
			}
		}
	}
	for _, name := range r.Policies {
		if delays(name) {
			return true
		}
	}
	return false
}

func delaying(l algo.Limit) bool { return l.Kind == algo.LeakyBucket && !l.NoDelay }

// newNativeRoute prepares route r's engine path to upstream u over pool.
func newNativeRoute(u *config.Upstream, pool *h1.Pool, errs errCounters, fails *failureLog) *nativeRoute {
	n := &nativeRoute{pool: pool, errs: errs, fails: fails, hostUpstream: u.Host == config.HostUpstream,
		readExpired: readTimeoutExpired(u.Name, errs.upstream, fails)}
	if u.Host != "" && u.Host != config.HostClient && u.Host != config.HostUpstream {
		n.host = u.Host
	}
	rq := u.RequestHeaders
	n.xff, n.xfh = !names(rq, "X-Forwarded-For"), !names(rq, "X-Forwarded-Host")
	n.xfp, n.xri = !names(rq, "X-Forwarded-Proto"), !names(rq, "X-Real-Ip")
	n.reqDrop = append([]string{"Forwarded"}, rq.Remove...)
	for _, h := range rq.Set {
		n.reqSet = append(n.reqSet, h1.FieldEdit{Name: h.Name, Value: h.Value})
	}
	rs := u.ResponseHeaders
	n.plainDrop = rs.Remove
	n.limitedDrop = append(append([]string(nil), rs.Remove...), upstreamQuotaHeaders[:]...)
	for _, h := range rs.Set {
		n.respSet = append(n.respSet, h1.FieldEdit{Name: h.Name, Value: h.Value})
	}
	return n
}

// names reports whether rules remove or set the field name
// (case-insensitively).
func names(rules config.HeaderRules, name string) bool {
	for _, k := range rules.Remove {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	for _, h := range rules.Set {
		if strings.EqualFold(h.Name, name) {
			return true
		}
	}
	return false
}
