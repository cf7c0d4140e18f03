// Package overload is a harness for overload tests: an upstream of fixed
// capacity (N workers, each request holding one for a fixed service
// time, the rest queued inside the upstream) and an open-loop load
// generator that sends at a set rate whatever the answers, as real
// clients do.
package overload

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Upstream is an HTTP server of Workers workers taking Service each per
// request; requests beyond the workers wait in its own queue.
type Upstream struct {
	*httptest.Server
	service time.Duration

	mu       sync.Mutex
	cond     *sync.Cond
	workers  int
	busy     int
	waiting  int
	maxQueue int
	served   atomic.Int64
}

// NewUpstream starts an upstream of workers × service on loopback.
func NewUpstream(t testing.TB, workers int, service time.Duration) *Upstream {
	u := &Upstream{service: service, workers: workers}
	u.cond = sync.NewCond(&u.mu)
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *Upstream) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	u.mu.Lock()
	u.waiting++
	u.maxQueue = max(u.maxQueue, u.waiting)
	for u.busy >= u.workers {
		u.cond.Wait()
	}
	u.waiting--
	u.busy++
	u.mu.Unlock()
	time.Sleep(u.service)
	u.mu.Lock()
	u.busy--
	u.cond.Broadcast()
	u.mu.Unlock()
	u.served.Add(1)
	_, _ = io.WriteString(w, "ok")
}

// SetWorkers changes the number of workers (requests being served keep
// theirs).
func (u *Upstream) SetWorkers(n int) {
	u.mu.Lock()
	u.workers = n
	u.cond.Broadcast()
	u.mu.Unlock()
}

// MaxQueue returns the most requests that ever waited for a worker.
func (u *Upstream) MaxQueue() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.maxQueue
}

// Served returns the requests served so far.
func (u *Upstream) Served() int64 { return u.served.Load() }

// Request is one request of a load: its path and headers, and the labels
// its result is counted under.
type Request struct {
	Path          string
	Header        http.Header
	Class, Client string
}

// Result is one request's answer.
type Result struct {
	Class, Client string
	Status        int // 0: the request failed
	Start         time.Duration
	Latency       time.Duration
}

// Run sends requests to base at rate per second for d, open loop: request
// i goes at i/rate whatever became of the earlier ones, next(i) says what
// it is. It returns every result once all answered (or timed out).
func Run(ctx context.Context, c *http.Client, base string, rate float64, d time.Duration, next func(i int) Request) []Result {
	n := int(rate * d.Seconds())
	out := make([]Result, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	sent := n // out is not resliced while senders write into it
	for i := range n {
		at := time.Duration(float64(i) / rate * float64(time.Second))
		if w := at - time.Since(t0); w > 0 {
			time.Sleep(w)
		}
		if ctx.Err() != nil {
			sent = i
			break
		}
		q := next(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = send(ctx, c, base, q, t0)
		}()
	}
	wg.Wait()
	return out[:sent]
}

func send(ctx context.Context, c *http.Client, base string, q Request, t0 time.Time) Result {
	res := Result{Class: q.Class, Client: q.Client, Start: time.Since(t0)}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+q.Path, nil)
	if err != nil {
		return res
	}
	for k, v := range q.Header {
		req.Header[k] = v
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return res
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	res.Status, res.Latency = resp.StatusCode, time.Since(start)
	return res
}

// Client returns an HTTP client for a load: enough idle connections per
// host for every request in flight, and a timeout.
func Client(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096}}
}

// Stats are the figures of some results.
type Stats struct {
	Sent, OK int
	P50, P99 time.Duration // of the successful ones
}

// Of returns the stats of the results that keep selects, from after
// (their start) on.
func Of(rs []Result, after time.Duration, keep func(Result) bool) Stats {
	var s Stats
	var lat []time.Duration
	for _, r := range rs {
		if r.Start < after || !keep(r) {
			continue
		}
		s.Sent++
		if r.Status == http.StatusOK {
			s.OK++
			lat = append(lat, r.Latency)
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		s.P50 = lat[len(lat)/2]
		s.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return s
}

// Success returns OK ÷ Sent (1 when nothing was sent).
func (s Stats) Success() float64 {
	if s.Sent == 0 {
		return 1
	}
	return float64(s.OK) / float64(s.Sent)
}

// Direct returns the responses per second c gets from u with conc
// requests always in flight for d (closed loop, no proxy): what this
// machine can drive through u at all, to tell a loaded host from a slow
// proxy.
func Direct(c *http.Client, u *Upstream, conc int, d time.Duration) float64 {
	var n atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if resp, err := c.Get(u.URL); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / d.Seconds()
}
