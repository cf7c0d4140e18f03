package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rlproxy/internal/accesslog"
	"rlproxy/internal/config"
	"rlproxy/internal/metrics"
	"rlproxy/internal/policy"
	"rlproxy/internal/realip"
	"rlproxy/internal/tlsutil"
	upstreampkg "rlproxy/internal/upstream"
)

// NewRuntime builds the request-path view of cfg around limiter with
// upstream servers of its own (closed by Close): for tests and tools that
// serve one configuration. A server uses NewRuntimeOn with a Set that
// outlives reloads.
func NewRuntime(cfg *config.Config, limiter *policy.Limiter, m *metrics.Metrics, log *slog.Logger) (*Runtime, error) {
	set := NewUpstreamSet(m, log)
	rt, err := NewRuntimeOn(set, cfg, limiter, m, log)
	if err != nil {
		set.Close()
		return nil, err
	}
	rt.ownSet = set
	return rt, nil
}

// NewUpstreamSet returns the upstream servers' Set whose transports this
// package builds (newTransport), for NewRuntimeOn.
func NewUpstreamSet(m *metrics.Metrics, log *slog.Logger) *upstreampkg.Set {
	return upstreampkg.NewSet(upstreampkg.Options{
		NewTransport: func(u *config.Upstream, server *url.URL) (upstreampkg.Transport, error) {
			return newTransport(u, server)
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
	rt := &Runtime{Config: cfg, Limiter: limiter, realIP: ri, upstreams: map[string]*upstream{}, redact: accesslog.QueryKeys(cfg)}
	if m != nil {
		rt.noRoute = m.Route(config.ReservedRouteName)
	}
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
	// One reverse proxy per route (sharing its upstream's pool), so
	// upstream errors are counted per route.
	for _, route := range limiter.Routes() {
		u := cfg.Upstreams[route.Upstream]
		if u == nil { // a route of a decision service only (listen: ""): nothing to forward to
			continue
		}
		up := &upstream{}
		if m != nil {
			up.traffic = m.Route(route.Name)
		}
		rt.upstreams[route.Name] = up
		if u.Builtin == "echo" {
			up.plain, up.limited = echoHandler{ri}, echoHandler{ri}
			continue
		}
		var errs prometheus.Counter
		if m != nil {
			errs = m.UpstreamErrors(route.Name)
		}
		up.pool = pools[route.Upstream]
		up.plain = newReverseProxy(u, up.pool, ri, errs, log, false)
		up.limited = newReverseProxy(u, up.pool, ri, errs, log, true)
	}
	return rt, nil
}

// Close releases what only this Runtime uses: the quota endpoint's local
// limiter (its sweeper) and, for a Runtime of NewRuntime, its upstream
// servers' connections and probers. (A Set shared across reloads closes
// servers as reloads drop them.)
func (rt *Runtime) Close() {
	if rt.ownSet != nil {
		rt.ownSet.Close()
	}
	if rt.quota != nil {
		_ = rt.quota.local.Close()
	}
}

// upstream is one route's handlers: limited routes use a reverse proxy
// that strips the upstream's own quota headers (ours are already set).
type upstream struct {
	plain, limited http.Handler
	pool           *upstreampkg.Pool     // nil for a builtin
	traffic        *metrics.RouteTraffic // nil without metrics
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
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
		tr.ForceAttemptHTTP2 = true
	}
	return newDirectTransport(server, tr), nil
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

func newReverseProxy(u *config.Upstream, tr http.RoundTripper, ri *realip.Resolver, errs prometheus.Counter, log *slog.Logger, limited bool) *httputil.ReverseProxy {
	target := u.URL
	rp := &httputil.ReverseProxy{
		Transport:  tr,
		BufferPool: newBufferPool(),
		// 0: ReverseProxy still flushes every write of streamed responses
		// (text/event-stream, or no Content-Length); a response of known
		// length is written through the server's buffer. (-1 would flush
		// every response after every write and arm a timer per request.)
		FlushInterval: 0,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			// X-Forwarded-For per CONFIG-SPEC: a trusted peer's chain plus the
			// peer; an untrusted peer alone (its own header is dropped, so a
			// client cannot forge its way into the upstream's logs).
			peer := peerAddr(pr.In.RemoteAddr)
			// One backing array for the three values (one allocation);
			// each slice is capped so an append elsewhere copies.
			proto := protoHTTP
			if pr.In.TLS != nil {
				proto = protoHTTPS
			}
			v := &[3]string{ri.ForwardedFor(peer, pr.In.Header), pr.In.Host, proto}
			pr.Out.Header["X-Forwarded-For"] = v[0:1:1]
			pr.Out.Header["X-Forwarded-Host"] = v[1:2:2]
			pr.Out.Header["X-Forwarded-Proto"] = v[2:3:3]
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if bodyTimedOut(r) { // the client stalled (its read also cancelled the context)
				w.Header()["Connection"] = []string{"close"} // the rest of the body never comes
				writeProblem(w, r, problemBodyTimeout, nil, nil)
				return
			}
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				// The client went away: nobody to answer, not the upstream's fault.
				return
			}
			if errs != nil {
				errs.Inc()
			}
			if log != nil {
				log.Warn("upstream error", "upstream", u.Name, "path", r.URL.Path, "err", err)
			}
			writeProblem(w, r, upstreamProblem(err), nil, nil)
		},
	}
	rp.ModifyResponse = func(resp *http.Response) error {
		// An upstream may answer a body cut short by server.body_timeout
		// before the transport notices: the client still gets its 408.
		if bodyTimedOut(resp.Request) {
			return errBodyTimeout
		}
		if limited {
			stripQuotaHeaders(resp.Header)
		}
		return nil
	}
	return rp
}

// upstreamProblem is the answer to a failed upstream exchange: 502
// no-healthy-upstream when every server is out of rotation, 504 when the
// server did not answer in time (nginx gives 504 on proxy timeouts too),
// else 502.
func upstreamProblem(err error) problemKind {
	switch {
	case errors.Is(err, upstreampkg.ErrNoHealthy):
		return problemNoHealthy
	case isTimeout(err):
		return problemGatewayTimeout
	}
	return problemBadGateway
}

// errBodyTimeout makes ReverseProxy hand a response to ErrorHandler when
// the client's body stalled (server.body_timeout).
var errBodyTimeout = errors.New("request body stalled past server.body_timeout")
