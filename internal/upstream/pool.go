package upstream

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"rlproxy/internal/clientkey"
	"rlproxy/internal/config"
	"rlproxy/internal/metrics"
	"rlproxy/internal/reqview"
)

// ErrNoHealthy is RoundTrip's error when every server of the pool is held
// out of rotation (the proxy answers 502 no-healthy-upstream: a 503 would
// read as rlproxy's own outage).
var ErrNoHealthy = errors.New("no healthy upstream server")

// Pool is one configured upstream's servers behind a balancer: an
// http.RoundTripper that sends each request to a server (rewriting the
// request URL's host to it) and, when it could not be sent, to the next
// one, up to the upstream's retries. Built by a Set; immutable.
type Pool struct {
	// Name is the upstream's name.
	Name    string
	servers []*Server
	weights []int
	all     uint64 // the bits of every server index
	bal     balancer
	hashKey *clientkey.Extractor // client_hash only

	maxFails     int // 0 in a one-server pool: nginx never takes a lone server out
	failTimeout  time.Duration
	failStatuses [100]bool // 500..599
	retries      int
	retryTimeout time.Duration
	countBodies  bool // least_conn: a request is in flight until its body ends
	// hostUpstream sends each server's own host[:port] as Host
	// (upstreams.NAME.host: upstream, nginx's default): the rewrite that
	// ran before a server was picked could only name the first one.
	hostUpstream bool

	traffic metrics.UpstreamTraffic
	now     func() time.Time
	log     *slog.Logger
}

// newPool builds the pool of u over its servers (in u.Servers order).
func newPool(u *config.Upstream, servers []*Server, jwt config.JWT, hashSecret []byte, o *Options) (*Pool, error) {
	p := &Pool{Name: u.Name, servers: servers, maxFails: u.MaxFails, failTimeout: u.FailTimeout,
		retries: u.Retries, retryTimeout: u.RetryTimeout, now: o.Now, log: o.Log,
		hostUpstream: u.Host == config.HostUpstream}
	for i, s := range u.Servers {
		p.weights = append(p.weights, s.Weight)
		p.all |= 1 << i
	}
	if len(servers) == 1 {
		p.maxFails = 0
	}
	for _, c := range u.FailStatuses {
		p.failStatuses[c-500] = true
	}
	switch u.Balance {
	case config.BalanceLeastConn:
		p.bal, p.countBodies = &leastConn{rr: newRoundRobin(len(servers))}, true
	case config.BalanceClientHash:
		e, err := clientkey.New(u.HashKey, jwt, hashSecret)
		if err != nil {
			return nil, err
		}
		p.hashKey = e
		p.bal = newRing(p)
	default:
		p.bal = newRoundRobin(len(servers))
	}
	p.traffic = o.Metrics.Upstream(u.Name)
	return p, nil
}

// Servers returns the pool's servers in configuration order.
func (p *Pool) Servers() []*Server { return p.servers }

// NeedsClientIP reports whether RoundTrip reads the client address from
// the request's Exchange (client_hash on an ip key).
func (p *Pool) NeedsClientIP() bool { return p.hashKey != nil }

// Exchange is what a request's trip through a pool did, for the access
// log, and the client address client_hash may need. Attach it with
// WithExchange before the request reaches the pool.
type Exchange struct {
	ClientIP netip.Addr    // in: the client's real address
	Server   string        // out: the label of the last server tried
	Status   int           // out: its response status (0: none)
	Duration time.Duration // out: the last attempt's time to response headers
	Retries  int           // out: attempts after the first
}

type exchangeKey struct{}

// WithExchange returns ctx carrying x.
func WithExchange(ctx context.Context, x *Exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, x)
}

func exchangeFrom(ctx context.Context) *Exchange {
	x, _ := ctx.Value(exchangeKey{}).(*Exchange)
	return x
}

// RoundTrip implements http.RoundTripper. It sets req.URL.Host to each
// server it tries: req is the outgoing request a reverse proxy made for
// this exchange alone. Errors: ErrNoHealthy, a *ClientError when the
// client made the attempt fail (blame), or the last server's error.
func (p *Pool) RoundTrip(req *http.Request) (*http.Response, error) {
	var t Trip
	// The key sources read headers, query and TLS state: the view of
	// them, read in place.
	v := reqview.View{Header: reqview.StdHeaders(req.Header), Query: req.URL.RawQuery, TLS: req.TLS}
	p.Begin(&t, exchangeFrom(req.Context()), &v)
	var body *sentBody
	if req.Body != nil && req.Body != http.NoBody {
		body = &sentBody{ReadCloser: req.Body, now: p.now}
		req.Body = body
	}
	for {
		s, err := t.Next()
		if err != nil {
			return nil, err
		}
		req.URL.Host = s.url.Host
		if p.hostUpstream {
			req.Host = s.url.Host
		}
		resp, err := s.transport.RoundTrip(req)
		if err == nil {
			t.Responded(resp.StatusCode)
			if p.countBodies && resp.Body != nil && resp.Body != http.NoBody {
				resp.Body = &countedBody{ReadCloser: resp.Body, s: s}
			} else {
				t.Done()
			}
			return resp, nil
		}
		retry, final := t.Failed(err, blame(req, body), body.slow(), retriable(req, body, err))
		if !retry {
			return nil, final
		}
	}
}

// retried counts one retry.
func (p *Pool) retried(x *Exchange) {
	p.traffic.Retries.Inc()
	if x != nil {
		x.Retries++
	}
}

// pick returns the server for the next attempt, claiming the trial request
// of a server whose fail_timeout ran out; -1 when none is left.
func (p *Pool) pick(now int64, tried uint64, hash uint32) int {
	for {
		i := p.bal.pick(p, now, tried, hash)
		if i < 0 {
			return -1
		}
		s := p.servers[i]
		if _, trial := s.eligible(now); !trial || s.claimTrial(now, p.failTimeout) {
			return i
		}
		tried |= 1 << i // another request took its trial
	}
}

// retriable is Retriable for req, whose body (nil: none) RoundTrip
// watches.
func retriable(req *http.Request, body *sentBody, err error) bool {
	return Retriable(req.Method, body != nil && body.read.Load(), err)
}

// bodyStall is how long one read of a client's body may block before the
// client counts as slow: a server that fails such an attempt may have given
// up waiting on the client (as gunicorn and Puma do), so it is not blamed.
const bodyStall = time.Second

// sentBody is a request body that remembers whether it was read, whether
// it was read to its end, whether one read blocked for bodyStall or more,
// and whether a read failed: the client's body, not the server, then ended
// the attempt (blame).
type sentBody struct {
	io.ReadCloser
	now     func() time.Time
	read    atomic.Bool
	done    atomic.Bool // io.EOF seen
	stalled atomic.Bool // one read blocked for bodyStall or more
	failed  atomic.Bool
}

func (b *sentBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	start := b.now()
	n, err := b.ReadCloser.Read(p)
	if b.now().Sub(start) >= bodyStall {
		b.stalled.Store(true)
	}
	switch {
	case err == io.EOF:
		b.done.Store(true)
	case err != nil:
		b.failed.Store(true)
	}
	return n, err
}

// slow reports whether b (nil: no body) held the attempt up: still being
// read when it failed, or stalled in a read. nginx, which reads a body
// before sending it, never sends a server a slow one.
func (b *sentBody) slow() bool {
	return b != nil && (b.read.Load() && !b.done.Load() || b.stalled.Load())
}

// Close keeps the body open: a transport closes it on a failed attempt,
// and an unread body may still go to the next server. The server closes
// the incoming body when the handler returns.
func (b *sentBody) Close() error { return nil }

// countedBody ends its server's in-flight count when the response body
// is closed (least_conn counts a request until its response is done).
type countedBody struct {
	io.ReadCloser
	s    *Server
	once sync.Once
}

func (b *countedBody) Close() error {
	b.once.Do(func() { b.s.inflight.Add(-1) })
	return b.ReadCloser.Close()
}
