// Command ceiling is the benchmark's "what Go can do" row: a reverse proxy
// on fasthttp (an HTTP/1.1 engine that parses into reused buffers and builds
// no header maps) with a per-IP token bucket of the same limit as
// bench/configs/rlproxy-memory.yaml, forwarding with fasthttp.HostClient
// over keep-alive connections. It is a module of its own so fasthttp stays
// out of rlproxy's and the bench harness's go.mod.
package main

import (
	"flag"
	"log"
	"net/netip"
	"net/url"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// bucket is one client's token bucket: tokens left at last (Unix ns).
type bucket struct {
	tokens float64
	last   int64
}

// limiter holds a token bucket per client address; the map only grows,
// which is fine for a benchmark with a few client addresses.
type limiter struct {
	mu          sync.Mutex
	rate, burst float64 // tokens per second; bucket size
	buckets     map[netip.Addr]bucket
}

// allow takes one token from ip's bucket at time now (Unix ns), refilled at
// rate since its last request and capped at burst; false when none is left.
func (l *limiter) allow(ip netip.Addr, now int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[ip]
	if !ok {
		b = bucket{tokens: l.burst, last: now}
	}
	b.tokens = min(l.burst, b.tokens+float64(now-b.last)*l.rate/1e9)
	b.last = now
	allowed := b.tokens >= 1
	if allowed {
		b.tokens--
	}
	l.buckets[ip] = b
	return allowed
}

func main() {
	listen := flag.String("listen", "127.0.0.1:18182", "address to serve on (loopback)")
	upstream := flag.String("upstream", "http://127.0.0.1:18100", "origin URL")
	rate := flag.Float64("rate", 1e6, "tokens per second per client IP (rlproxy-memory.yaml: 1000000r/s)")
	burst := flag.Float64("burst", 1e6, "bucket size per client IP (rlproxy-memory.yaml: 1000000)")
	flag.Parse()
	target, err := url.Parse(*upstream)
	if err != nil || target.Host == "" {
		log.Fatalf("parsing -upstream %q: want http://host:port (%v)", *upstream, err)
	}
	lim := &limiter{rate: *rate, burst: *burst, buckets: map[netip.Addr]bucket{}}
	client := &fasthttp.HostClient{Addr: target.Host, MaxConns: 1024, DisableHeaderNamesNormalizing: true}
	handler := func(ctx *fasthttp.RequestCtx) {
		ip, _ := netip.AddrFromSlice(ctx.RemoteIP())
		if !lim.allow(ip.Unmap(), time.Now().UnixNano()) {
			ctx.Response.Header.Set("Retry-After", "1")
			ctx.SetStatusCode(fasthttp.StatusTooManyRequests)
			return
		}
		// Connection is hop-by-hop (RFC 9110 §7.6.1): the client's close is
		// kept for this connection, not sent upstream.
		closeConn := ctx.Request.Header.ConnectionClose()
		ctx.Request.Header.Del("Connection")
		if err := client.Do(&ctx.Request, &ctx.Response); err != nil {
			ctx.Error("bad gateway", fasthttp.StatusBadGateway)
		}
		ctx.Response.Header.Del("Connection")
		if closeConn {
			ctx.SetConnectionClose()
		}
	}
	srv := &fasthttp.Server{Handler: handler, ReadTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second,
		NoDefaultServerHeader: true, DisableHeaderNamesNormalizing: true}
	log.Fatal(srv.ListenAndServe(*listen))
}
