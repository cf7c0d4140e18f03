// Command minproxy is the floor of the rlproxy benchmark: the least a Go
// reverse proxy built on net/http/httputil must spend per request. It is
// httputil.ReverseProxy with Rewrite (SetURL only), a tuned http.Transport
// (keep-alive, 256 idle connections per host, no HTTP/2 attempt) and a
// sync.Pool-backed httputil.BufferPool — nothing else. rlproxy's proxy path
// adds routing, key extraction and a limiter decision on top of this.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// copyBufSize is the size of the buffers ReverseProxy copies bodies through
// (bytes); 32 KiB is io.Copy's default.
const copyBufSize = 32 << 10

// bufferPool is an httputil.BufferPool backed by a sync.Pool of *[]byte, so
// copying a response body does not allocate a fresh 32 KiB buffer.
type bufferPool struct{ p sync.Pool }

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any {
		b := make([]byte, copyBufSize)
		return &b
	}}}
}

// Get returns a buffer of copyBufSize bytes.
func (b *bufferPool) Get() []byte { return *(b.p.Get().(*[]byte)) }

// Put returns buf to the pool.
func (b *bufferPool) Put(buf []byte) {
	buf = buf[:cap(buf)]
	b.p.Put(&buf)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:18181", "address to serve on (loopback)")
	upstream := flag.String("upstream", "http://127.0.0.1:18100", "origin URL")
	flag.Parse()

	target, err := url.Parse(*upstream)
	if err != nil {
		log.Fatalf("parsing -upstream: %v", err)
	}
	transport := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
	}
	proxy := &httputil.ReverseProxy{
		Rewrite:    func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:  transport,
		BufferPool: newBufferPool(),
	}
	srv := &http.Server{
		Addr:              *listen,
		Handler:           proxy,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	log.Fatal(srv.ListenAndServe())
}
