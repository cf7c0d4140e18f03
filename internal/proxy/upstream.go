package proxy

import (
	"crypto/tls"
	"fmt"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rlproxy/internal/accesslog"
	"rlproxy/internal/config"
	"rlproxy/internal/h1"
	"rlproxy/internal/logging"
	"rlproxy/internal/metrics"
	"rlproxy/internal/policy"
	"rlproxy/internal/realip"
	"rlproxy/internal/reqview"
	"rlproxy/internal/tlsutil"
	"rlproxy/internal/tracing"
	upstreampkg "rlproxy/internal/upstream"
)

// NewUpstreamSet returns the upstream servers' Set whose transports this
// package builds (newTransport, each attempt traced by tr when not nil),
// for NewRuntimeOn.
func NewUpstreamSet(m *metrics.Metrics, log *slog.Logger, tr *tracing.Tracer) *upstreampkg.Set {
	return upstreampkg.NewSet(upstreampkg.Options{
		NewTransport: func(u *config.Upstream, server *url.URL) (upstreampkg.Transport, error) {
			return newServerTransport(u, server, tr)
		},
		Metrics: m, Log: log,
	})
}

// NewRuntimeOn builds the request-path view of cfg around limiter: the
// real-IP resolver, the upstream pools (from set, which keeps unchanged
// servers, their connections and health across reloads), two reverse
// proxies per route (limited routes strip the upstream's own quota
// headers) and the quota endpoint.
func NewRuntimeOn(set *upstreampkg.Set, cfg *config.Config, limiter *policy.Limiter, m *metrics.Metrics, log *slog.Logger) (*Runtime, error) {
	ri, err := realip.New(cfg.RealIP)
	if err != nil {
		return nil, fmt.Errorf("building real_ip: %w", err)
	}
	if m == nil {
		m = metrics.Discard()
	}
	rt := &Runtime{Config: cfg, Limiter: limiter, realIP: ri, upstreams: map[string]*upstream{}, redact: accesslog.QueryKeys(cfg)}
	rt.noRoute = m.Route(config.ReservedRouteName)
	if cfg.QuotaEndpoint.Path != "" {
		rt.quota = newQuotaEndpoint(cfg)
	}
	// Last: a Set's update retires the servers a new config dropped.
	pools, err := set.Update(cfg)
	if err != nil {
		if rt.quota != nil {
			_ = rt.quota.local.Close()
		}
		return nil, fmt.Errorf("building upstreams: %w", err)
	}
	rt.gates = newGates(cfg, time.Now())
	allowed := make(map[string]upgrades, len(cfg.Routes))
	routes := make(map[string]*config.Route, len(cfg.Routes))
	for _, r := range cfg.Routes {
		allowed[r.Name], routes[r.Name] = r.Upgrades, r
	}
	// One reverse proxy per route (sharing its upstream's pool), so
	// upstream errors are counted per route; their library lines go to
	// the structured log, capped together.
	errLog := logging.LibraryLog(log, slog.LevelWarn, "net/http/httputil")
	fails := &failureLog{log: log, sampler: logging.NewRefusalSampler(log, logging.LibraryLinesPerSecond)}
	for _, route := range limiter.Routes() {
		u := cfg.Upstreams[route.Upstream]
		if u == nil { // a route of a decision service only (listen: ""): nothing to forward to
			continue
		}
		up := &upstream{upgrades: allowed[route.Name], overload: newOverload(cfg, routes[route.Name], rt.gates[route.Upstream])}
		if cr := routeConfig(cfg, route.Name); cr != nil {
			up.maxBody, up.rate, up.rateAfter = cr.MaxBodySize, cr.LimitRate, cr.LimitRateAfter
		}
		up.traffic = m.Route(route.Name)
		rt.upstreams[route.Name] = up
		// The echo upstream goes through the same rewriter as a real one,
		// so it shows what a real one would receive.
		var tr http.RoundTripper = echoTransport{}
		var errs errCounters
		if u.Builtin == "" {
			up.pool = pools[route.Upstream]
			tr = up.pool
			errs = errCounters{
				upstream:      m.UpstreamErrors(route.Name),
				timeout:       m.ProxyErrors(route.Name, metrics.ReasonUpstreamTimeout),
				clientBody:    m.ProxyErrors(route.Name, metrics.ReasonClientBody),
				clientRequest: m.ProxyErrors(route.Name, metrics.ReasonClientRequest),
			}
		}
		reads := newReadTimeouts(u.ReadTimeout, cfg.Server.StreamIdleTimeout, readTimeoutExpired(u.Name, errs.upstream, fails))
		pr := newPathRewrite(routes[route.Name])
		up.plain = newReverseProxy(u, tr, ri, pr, errs, reads, fails, errLog, false)
		up.limited = newReverseProxy(u, tr, ri, pr, errs, reads, fails, errLog, true)
		if cfg.TLS != nil && cfg.TLS.ClientHeaders {
			withClientCertHeaders(up.plain)
			withClientCertHeaders(up.limited)
		}
		if nativeSupports(cfg, u, routes[route.Name], up) {
			up.native = newNativeRoute(u, rt.h1Pool(u), errs, fails)
		}
	}
	return rt, nil
}

// routeConfig returns the configuration of route name, or nil.
func routeConfig(cfg *config.Config, name string) *config.Route {
	for _, r := range cfg.Routes {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// Close releases what only this Runtime uses: the quota endpoint's local
// limiter (its sweeper). Upstream servers belong to the Set passed to
// NewRuntimeOn, which closes them as reloads drop them.
func (rt *Runtime) Close() {
	if rt.quota != nil {
		_ = rt.quota.local.Close()
	}
	for _, p := range rt.h1Pools {
		p.Close()
	}
}

// h1Pool returns the engine's connection pool of upstream u, one per
// upstream and Runtime (closed with it).
func (rt *Runtime) h1Pool(u *config.Upstream) *h1.Pool {
	p := rt.h1Pools[u.Name]
	if p == nil {
		p = newH1Pool(u)
		if rt.h1Pools == nil {
			rt.h1Pools = map[string]*h1.Pool{}
		}
		rt.h1Pools[u.Name] = p
	}
	return p
}

// upstream is one route's handlers: limited routes use a reverse proxy
// that strips the upstream's own quota headers (ours are already set).
type upstream struct {
	plain, limited *httputil.ReverseProxy // the echo upstream too (its transport answers)
	pool           *upstreampkg.Pool      // nil for a builtin
	traffic        *metrics.RouteTraffic
	upgrades       upgrades // the route's upgrades
	// The route's edge limits (0 = off): max_body_size, limit_rate and
	// limit_rate_after, in bytes and bytes per second.
	maxBody, rate, rateAfter int64
	overload                 // the upstream's adaptive gate (nil gate: none)
	// native is the route's HTTP/1.1 engine path (native.go); nil: its
	// requests are handed to net/http.
	native *nativeRoute
}

// dialTimeout bounds connecting to an upstream.
const dialTimeout = 5 * time.Second

// newTransport returns u's transport: the direct path for body-less GET
// and HEAD (transport.go) over an http.Transport sized for a busy upstream:
// many idle keep-alive connections per host (the default 2 would open a
// connection per request under load), bounded dial and response-header
// waits.
func newTransport(u *config.Upstream, server *url.URL) (*directTransport, error) {
	tr := &http.Transport{
		Proxy:                  nil, // an environment HTTP proxy is never wanted between us and the upstream
		DialContext:            (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:           4096,
		MaxIdleConnsPerHost:    1024,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    5 * time.Second,
		ResponseHeaderTimeout:  u.ResponseHeaderTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		// A proxy passes the client's Accept-Encoding through: without
		// this the transport would ask for gzip on its own and unzip the
		// answer, costing CPU on both sides for nothing.
		DisableCompression: true,
	}
	if server.Scheme == "https" {
		pool, err := tlsutil.CertPool(u.CAFile)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: u.TLSServerName}
		tr.ForceAttemptHTTP2 = true
	}
	dt := newDirectTransport(server, tr)
	if u.Protocol == config.ProtocolH2C {
		// HTTP/2 with prior knowledge on every connection (RFC 9113
		// §3.3); the direct path speaks HTTP/1.1 only.
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
		dt.bypass = true
	}
	return dt, nil
}

// copyBufSize is the size of the response copy buffers (io.Copy's default).
const copyBufSize = 32 << 10

// bufferPool shares copy buffers between responses (httputil.BufferPool).
// It pools array pointers, so Put converts the slice back without
// allocating (pooling *[]byte would allocate a slice header per Put).
type bufferPool struct{ p sync.Pool }

func newBufferPool() *bufferPool {
	bp := &bufferPool{}
	bp.p.New = func() any { return new([copyBufSize]byte) }
	return bp
}

func (bp *bufferPool) Get() []byte { return bp.p.Get().(*[copyBufSize]byte)[:] }
func (bp *bufferPool) Put(b []byte) {
	if cap(b) >= copyBufSize { // only ours: anything else is left to the GC
		bp.p.Put((*[copyBufSize]byte)(b[:copyBufSize]))
	}
}

// X-Forwarded-Proto values; Rewrite copies them into a per-request array.
const (
	protoHTTP  = "http"
	protoHTTPS = "https"
)

// errCounters are one route's counters of the answers rlproxy gives
// instead of the upstream's (all nil for a builtin upstream, which has none).
type errCounters struct{ upstream, timeout, clientBody, clientRequest prometheus.Counter }

func inc(c prometheus.Counter) {
	if c != nil {
		c.Inc()
	}
}

// readTimeoutExpired counts (in c, route's rlproxy_upstream_errors_total)
// and logs (capped, fails) one response of upstream u cut by its read bound.
func readTimeoutExpired(u string, c prometheus.Counter, fails *failureLog) func() {
	return func() {
		inc(c)
		fails.warn("upstream read timeout: response cut", "upstream", u)
	}
}

func newReverseProxy(u *config.Upstream, tr http.RoundTripper, ri *realip.Resolver, pr *pathRewrite, errs errCounters, reads *readTimeouts, fails *failureLog, errLog *stdlog.Logger, limited bool) *httputil.ReverseProxy {
	rw := newRewriter(u, ri)
	rw.path = pr
	respEdit := newHeaderEdit(u.ResponseHeaders)
	return &httputil.ReverseProxy{
		Transport:  tr,
		BufferPool: newBufferPool(),
		// 0: ReverseProxy still flushes every write of streamed responses
		// (text/event-stream, or no Content-Length); a response of known
		// length is written through the server's buffer. (-1 would flush
		// every response after every write and arm a timer per request.)
		FlushInterval: 0,
		Rewrite:       rw.rewrite,
		// What ReverseProxy logs itself (an upstream body cut short) goes to
		// the structured log; a client that left is not its to log (the
		// transports answer context.Canceled, which it does not log).
		ErrorLog: errLog,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			answerError(w, r, err, u.Name, errs, fails)
		},
		ModifyResponse: func(resp *http.Response) error {
			// An upstream may answer a body cut short by
			// server.body_timeout, or a malformed one, before the
			// transport notices: the client still gets its 408 or 400.
			if bodyTimedOut(resp.Request) || bodyFailed(resp.Request) || bodyTooLarge(resp.Request) {
				return errClientBody
			}
			if limited {
				stripQuotaHeaders(resp.Header)
			}
			respEdit.apply(resp.Header)
			reads.wrap(resp)
			return nil
		},
	}
}

// rewriter builds the request sent to one upstream.
type rewriter struct {
	u      *config.Upstream
	target *url.URL
	// base is the upstream URL's path, before the client's (path "/api/"
	// and request "/x" make "/api/x", as httputil joins them).
	base    string
	ri      *realip.Resolver
	reqEdit headerEdit
	// path is the route's strip_prefix or rewrite; nil: none.
	path *pathRewrite
}

// echoURL is the target of the built-in echo upstream, which has no URL.
var echoURL = &url.URL{Scheme: "http", Host: "echo"}

func newRewriter(u *config.Upstream, ri *realip.Resolver) *rewriter {
	target := u.URL
	if target == nil {
		target = echoURL
	}
	return &rewriter{u: u, target: target, base: strings.TrimSuffix(target.EscapedPath(), "/"),
		ri: ri, reqEdit: newHeaderEdit(u.RequestHeaders)}
}

// rewrite is ReverseProxy's Rewrite: the client's request line, the Host
// upstreams.NAME.host names, the forwarding headers, request_headers.
func (rw *rewriter) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(rw.target)
	setRequestTarget(pr, rw.target, rw.base, rw.path)
	switch rw.u.Host {
	case config.HostClient, "":
		pr.Out.Host = pr.In.Host
	case config.HostUpstream:
		pr.Out.Host = rw.target.Host
	default:
		pr.Out.Host = rw.u.Host
	}
	// X-Forwarded-For per docs/CONTRACT.md: a trusted peer's chain plus
	// the peer; an untrusted peer alone (its own header is dropped, so a
	// client cannot forge its way into the upstream's logs). X-Real-IP is
	// the client address real_ip resolved, never the client's own value
	// (nginx: proxy_set_header X-Real-IP $remote_addr after real_ip).
	peer := peerAddr(pr.In.RemoteAddr)
	proto := protoHTTP
	if pr.In.TLS != nil {
		proto = protoHTTPS
	}
	client := rw.ri.ClientIP(peer, reqview.StdHeaders(pr.In.Header))
	// One backing array for the four values (one allocation); each slice
	// is capped so an append elsewhere copies.
	v := &[4]string{rw.ri.ForwardedFor(peer, reqview.StdHeaders(pr.In.Header)), pr.In.Host, proto}
	h := pr.Out.Header
	dropForwardingAliases(h)
	h["X-Forwarded-For"] = v[0:1:1]
	h["X-Forwarded-Host"] = v[1:2:2]
	h["X-Forwarded-Proto"] = v[2:3:3]
	delete(h, "X-Real-Ip")
	if client.IsValid() {
		v[3] = v[0] // the peer alone (the common case): no second string
		if client != peer || strings.IndexByte(v[0], ',') >= 0 {
			v[3] = client.String()
		}
		h["X-Real-Ip"] = v[3:4:4]
	}
	rw.reqEdit.apply(h)
}

// setRequestTarget makes the outgoing request line's path and query the
// client's own bytes (the request-target as received, after the upstream
// URL's path and query), as nginx proxy_pass without a URI passes them:
// ReverseProxy would drop a query it cannot parse (a ';', a bad escape)
// and re-encode the rest in sorted order, and url.URL re-escapes a path.
// A route's strip_prefix or rewrite (pr, nil for none) changes the path
// as nginx proxy_pass with a URI does (rewrite.go), and an empty query
// ("/x?") is then dropped, as nginx drops it. A request-target not in
// origin form (absolute form, "*") keeps the parsed URL's form, rewritten
// as well.
func setRequestTarget(pr *httputil.ProxyRequest, target *url.URL, base string, rw *pathRewrite) {
	raw := pr.In.RequestURI
	if rw != nil {
		raw = originForm(raw)
	}
	if raw == "" || raw[0] != '/' {
		return
	}
	path, query, hasQuery := strings.Cut(raw, "?")
	rewritten := false
	if rw != nil {
		if p, ok := rw.apply(path); ok {
			path, hasQuery, rewritten = p, query != "", true
		}
	}
	out := pr.Out.URL
	switch {
	case target.RawQuery == "":
		out.RawQuery = query
	case query == "":
		out.RawQuery = target.RawQuery
	default:
		out.RawQuery = target.RawQuery + "&" + query
	}
	out.ForceQuery = hasQuery && out.RawQuery == ""
	if base == "" && strings.HasPrefix(path, "//") {
		// An Opaque "//x" would be written as "http://x": keep the
		// escaped form instead (EscapedPath returns it when valid).
		out.Path, out.RawPath = pr.In.URL.Path, path
		if rewritten { // rewrite "/" after a prefix without its slash
			out.Path, _ = url.PathUnescape(path)
		}
		return
	}
	out.Opaque = base + path
}

// originForm returns the path and query of an absolute-form target as
// the client sent them ("http://h/p?q" → "/p?q", "http://h?q" → "/?q",
// nginx's empty path being "/"); any other target as it is. reqview has
// refused every absolute form but scheme "://" authority [path] [query].
func originForm(target string) string {
	i := strings.Index(target, "://")
	if target == "" || target[0] == '/' || i < 0 {
		return target
	}
	rest := target[i+3:]
	switch j := strings.IndexAny(rest, "/?"); {
	case j < 0:
		return "/"
	case rest[j] == '?':
		return "/" + rest[j:]
	default:
		return rest[j:]
	}
}
