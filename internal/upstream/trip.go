package upstream

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"time"

	"rlproxy/internal/reqview"
)

// Trip is one request's attempts over a pool's servers: Next picks a
// server (the balancer, health, passive breaker), the caller sends the
// request there, then tells the outcome — Responded with the response's
// status, or Failed, which says whether to try the next server (nginx
// proxy_next_upstream) — and Done once the response is over. RoundTrip
// drives it for net/http's transports; package proxy's HTTP/1.1 engine
// path drives it with its own connections. A Trip lives on its caller's
// stack or in a pooled record: it allocates nothing.
type Trip struct {
	p       *Pool
	x       *Exchange
	hash    uint32
	tried   uint64
	attempt int
	// start is the request's first attempt, now the current one's start.
	start, now time.Time
	s          *Server
	claimed    int64 // the server's downUntil when picked: non-zero, a trial
	lastErr    error
}

// Begin starts t over p for the request of view v (read by client_hash
// only), reporting into x (nil: nothing reported; x.ClientIP is the client
// address client_hash may key by).
func (p *Pool) Begin(t *Trip, x *Exchange, v *reqview.View) {
	*t = Trip{p: p, x: x}
	if p.hashKey != nil {
		var buf [96]byte
		var ip netip.Addr
		if x != nil {
			ip = x.ClientIP
		}
		t.hash = ringHash(p.hashKey.Key(buf[:0], v, ip))
	}
	t.start = p.now()
	t.now = t.start
}

// Next returns the server of the next attempt: ErrNoHealthy when every
// server is out of rotation, the last attempt's error when every server
// left was tried.
func (t *Trip) Next() (*Server, error) {
	p := t.p
	i := p.pick(t.now.UnixNano(), t.tried, t.hash)
	if i < 0 && t.lastErr != nil {
		return nil, t.lastErr
	}
	if i < 0 {
		return nil, ErrNoHealthy
	}
	if t.attempt > 0 {
		p.retried(t.x)
		t.now = p.now()
	}
	t.attempt++
	t.tried |= 1 << i
	t.s = p.servers[i]
	t.claimed = t.s.downUntil.Load()
	t.s.inflight.Add(1)
	return t.s, nil
}

// observe counts the attempt's time to its response head (or failure)
// and reports it with status (0: none).
func (t *Trip) observe(status int) {
	d := t.p.now().Sub(t.now)
	t.p.traffic.Duration.Observe(d.Seconds())
	if t.x != nil {
		t.x.Server, t.x.Duration, t.x.Status = t.s.Label, d, status
	}
}

// Responded notes the attempt's response head with status: a fail_statuses
// status counts against the server, any other is a success.
func (t *Trip) Responded(status int) {
	p, s := t.p, t.s
	t.observe(status)
	if status >= 500 && status <= 599 && p.failStatuses[status-500] {
		s.failed(p.now().UnixNano(), p.maxFails, p.failTimeout)
	} else {
		s.succeeded()
	}
}

// Done ends the attempt that Responded: its server's request is over
// (least_conn counts it until then).
func (t *Trip) Done() { t.s.inflight.Add(-1) }

// Failed notes that the attempt failed with err before a response. b is
// whose side it was on; slow, that the client's body held it up (the
// server may have given up on a slow client: not counted, not retried);
// retriable, that the request may go to another server (Retriable). It
// returns retry true to call Next again, or the error to answer: a
// *ClientError when the client made the attempt fail, else err.
func (t *Trip) Failed(err error, b Blame, slow, retriable bool) (retry bool, final error) {
	p, s := t.p, t.s
	t.observe(0)
	s.inflight.Add(-1)
	if b != BlameServer {
		// Not the server's fault: neither counted against it nor tried
		// on another server, and a trial it was goes to the next request.
		s.releaseTrial(t.claimed, t.now.UnixNano())
		return false, &ClientError{Blame: b, Err: err}
	}
	if slow {
		s.releaseTrial(t.claimed, t.now.UnixNano())
		return false, err
	}
	now := p.now()
	if s.failed(now.UnixNano(), p.maxFails, p.failTimeout) && p.log != nil {
		p.log.Warn("upstream server out of rotation", "upstream", p.Name, "server", s.Label,
			"max_fails", p.maxFails, "fail_timeout", p.failTimeout.String(), "err", err.Error())
	}
	if t.attempt > p.retries || !retriable || p.retryTimeout > 0 && now.Sub(t.start) >= p.retryTimeout {
		return false, err
	}
	t.lastErr, t.now = err, now
	return true, nil
}

// Retriable reports whether a failed attempt of a request with method may
// go to another server (nginx proxy_next_upstream error timeout): never
// once any of its body was read (bodyRead: it cannot be sent again), an
// idempotent method (RFC 9110 §9.2.2) whatever the error before a
// response, another method only when the connection could not be made
// (nothing was sent).
func Retriable(method string, bodyRead bool, err error) bool {
	if bodyRead {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// Addr is the server's address to dial, host:port (its Label).
func (s *Server) Addr() string { return s.Label }

// Host is the Host the server gets under upstreams.NAME.host: upstream:
// its URL's host[:port].
func (s *Server) Host() string { return s.url.Host }

// HostUpstream reports whether each server gets its own host as Host
// (upstreams.NAME.host: upstream).
func (p *Pool) HostUpstream() bool { return p.hostUpstream }

// Cleartext reports whether every server of p is an http:// one (none
// needs TLS).
func (p *Pool) Cleartext() bool {
	for _, s := range p.servers {
		if s.url.Scheme != "http" {
			return false
		}
	}
	return true
}
