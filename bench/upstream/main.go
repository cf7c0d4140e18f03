// Command upstream is the shared origin server of the rlproxy benchmark: every
// target (direct, nginx, Caddy, minproxy, rlproxy) forwards to one instance
// of it, so differences between rows are the proxies' own.
//
// GET /anything answers 200 with a fixed 13-byte body over keep-alive
// connections. GET /__counts answers the number of requests served so far
// as JSON; with -count-header NAME it also counts per value of that request
// header (the attack scenario counts per X-API-Key to see which requests
// reached the origin). Counting by header costs a mutex per request, so the
// throughput benchmark runs without it.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// body is the fixed response: small, so the benchmark measures per-request
// overhead rather than copying.
var body = []byte("hello, world\n")

// counters tallies served requests; safe for concurrent use.
type counters struct {
	total atomic.Int64 // requests served on the data path

	header string // header counted per value; "" disables per-value counts
	mu     sync.Mutex
	byVal  map[string]int64 // guarded by mu
}

// countsReply is the JSON body of GET /__counts.
type countsReply struct {
	Total    int64            `json:"total"`
	Header   string           `json:"header,omitempty"`
	ByHeader map[string]int64 `json:"by_header,omitempty"`
}

func (c *counters) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/__counts" {
		c.serveCounts(w)
		return
	}
	c.total.Add(1)
	if c.header != "" {
		v := r.Header.Get(c.header)
		c.mu.Lock()
		c.byVal[v]++
		c.mu.Unlock()
	}
	h := w.Header()
	h["Content-Type"] = []string{"text/plain; charset=utf-8"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	_, _ = w.Write(body)
}

func (c *counters) serveCounts(w http.ResponseWriter) {
	reply := countsReply{Total: c.total.Load(), Header: c.header}
	if c.header != "" {
		c.mu.Lock()
		reply.ByHeader = make(map[string]int64, len(c.byVal))
		for k, v := range c.byVal {
			reply.ByHeader[k] = v
		}
		c.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(reply)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:18100", "address to serve on (loopback)")
	countHeader := flag.String("count-header", "", "also count requests per value of this header (e.g. X-API-Key)")
	flag.Parse()

	c := &counters{header: http.CanonicalHeaderKey(*countHeader), byVal: map[string]int64{}}
	srv := &http.Server{
		Addr:              *listen,
		Handler:           c,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	log.Fatal(srv.ListenAndServe())
}
