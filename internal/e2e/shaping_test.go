package e2e

// Shaping caps and refunds: a request the leaky bucket accepted with a
// wait, then refused because the wait is longer than server.max_wait or
// server.max_waiting requests already wait, is charged by none — its
// charge is refunded before the answer, so the refused requests leave no
// water in the bucket to delay the next ones.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"rlproxy/internal/testutil/rlproxytest"
)

// shapingQueueFull is the problem type of a shaping-cap refusal.
const shapingQueueFull = "urn:rlproxy:problem:shaping-queue-full"

// shapingConfig is a leaky bucket of 10 r/s, burst 20, in delay mode: a
// request arriving at excess X units (one request = 1000 units, draining
// 10 units per ms) waits X/10 ms, so n simultaneous requests from idle
// wait 0, 100, …, (n−1)·100 ms. server is the shaping caps.
func shapingConfig(server string) string {
	return `
server: ` + server + `
upstreams: { app: { url: %q } }
policies: { shape: { algorithm: leaky_bucket, rate: 10r/s, burst: 20, key: ip } }
routes: [ { name: all, upstream: app, policies: [shape] } ]
`
}

// shapingAnswer is one response of a burst: its status, problem type ("" on
// a 200) and the time from send to the whole body.
type shapingAnswer struct {
	status  int
	typ     string
	latency time.Duration
	err     error
}

// shapingGet sends one GET on c and times it.
func shapingGet(c *http.Client, url string) shapingAnswer {
	start := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		return shapingAnswer{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	a := shapingAnswer{status: resp.StatusCode, latency: time.Since(start), err: err}
	if resp.StatusCode != http.StatusOK {
		var p struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			a.err = fmt.Errorf("status %d, body %q: %v", resp.StatusCode, body, err)
		}
		a.typ = p.Type
	}
	return a
}

// shapingBurst sends n simultaneous GETs over fresh connections (one
// client IP) and returns the time they were released and a channel that
// receives each answer as it arrives (buffered: n answers).
func shapingBurst(t *testing.T, url string, n int) (time.Time, <-chan shapingAnswer) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}, Timeout: 10 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	ch := make(chan shapingAnswer, n)
	start := make(chan struct{})
	var ready sync.WaitGroup
	for range n {
		ready.Add(1)
		go func() {
			ready.Done()
			<-start
			ch <- shapingGet(c, url)
		}()
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	return t0, ch
}

// shapingNext receives the next burst answer, failing after 10 s.
func shapingNext(t *testing.T, ch <-chan shapingAnswer) shapingAnswer {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatalf("burst request: %v", a.err)
		}
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("burst request unanswered after 10 s")
	}
	return shapingAnswer{}
}

// shapingNear reports a problem when got is not want ± 50 ms.
func shapingNear(what string, got, want time.Duration) []string {
	if d := got - want; d < -50*time.Millisecond || d > 50*time.Millisecond {
		return []string{fmt.Sprintf("%s: %v, want %v ± 50ms", what, got.Round(time.Millisecond), want.Round(time.Millisecond))}
	}
	return nil
}

// shapingMetrics checks the shaping refusals counter and the policy's
// decisions after a scenario.
func shapingMetrics(t *testing.T, in *rlproxytest.Instance, cap string, refusals, allowed, delayed int) (errs []string) {
	t.Helper()
	_, s := opsScrape(t, in)
	if got := opsValue(t, s, "rlproxy_shaping_refusals_total", "route", "all", "cap", cap); got != float64(refusals) {
		errs = append(errs, fmt.Sprintf("rlproxy_shaping_refusals_total{cap=%q} = %v, want %d", cap, got, refusals))
	}
	for dec, want := range map[string]int{"allowed": allowed, "delayed": delayed, "rejected": 0} {
		if got := opsValue(t, s, "rlproxy_requests_total", "route", "all", "policy", "shape", "decision", dec); got != float64(want) {
			errs = append(errs, fmt.Sprintf("rlproxy_requests_total{decision=%q} = %v, want %d", dec, got, want))
		}
	}
	return errs
}

// TestShapingMaxWaitingRefunds: max_waiting 3. Ten simultaneous requests
// are all accepted by the bucket (excess up to 9000 of 20000 units): one
// is served at once, three wait, six are refused as shaping-queue-full —
// and refunded, so the bucket holds the four accepted only: excess
// −1000 + 4·1000 = 3000 units at the burst, draining 10 per ms. A request
// sent at tp (after the refusals and the first waiting request came back,
// so a waiting slot is free) therefore waits (3000 + 1000)/10 − (tp − t0)
// = 400 ms − (tp − t0); without the refunds it would wait 1000 ms − (tp −
// t0), 600 ms more.
func TestShapingMaxWaitingRefunds(t *testing.T) {
	for _, st := range e2eStores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			coreRetryTimed(t, func() (errs []string) {
				in, up := e2eStart(t, st, shapingConfig("{ max_waiting: 3 }"))
				t0, ch := shapingBurst(t, in.URL+"/a", 10)
				var atOnce, waited, refused, other int
				var firstWait time.Duration
				for range 10 {
					a := shapingNext(t, ch)
					switch {
					case a.status == http.StatusTooManyRequests && a.typ == shapingQueueFull:
						refused++
						continue
					case a.status != http.StatusOK:
						other++
						errs = append(errs, fmt.Sprintf("burst answer %d %q", a.status, a.typ))
						continue
					case a.latency < 50*time.Millisecond:
						atOnce++
						continue
					}
					waited++
					if waited > 1 || refused != 6 {
						continue
					}
					// The first waiting request is back: probe now.
					firstWait = a.latency
					tp := time.Now()
					p := shapingGet(http.DefaultClient, in.URL+"/a")
					if p.err != nil || p.status != http.StatusOK {
						errs = append(errs, fmt.Sprintf("probe: %d %q %v, want 200 after a wait", p.status, p.typ, p.err))
						continue
					}
					t.Logf("probe sent %v after the burst (first waiting request served after %v): waited %v, expected %v",
						tp.Sub(t0).Round(time.Millisecond), firstWait.Round(time.Millisecond),
						p.latency.Round(time.Millisecond), (400*time.Millisecond - tp.Sub(t0)).Round(time.Millisecond))
					errs = append(errs, shapingNear(fmt.Sprintf("probe sent %v after the burst (first waiting request served after %v): wait",
						tp.Sub(t0).Round(time.Millisecond), firstWait.Round(time.Millisecond)),
						p.latency, 400*time.Millisecond-tp.Sub(t0))...)
				}
				if atOnce != 1 || waited != 3 || refused != 6 || other != 0 {
					errs = append(errs, fmt.Sprintf("burst of 10: %d at once, %d after a wait, %d shaping refusals, %d other; want 1, 3, 6, 0",
						atOnce, waited, refused, other))
				}
				if firstWait == 0 {
					errs = append(errs, "no probe sent")
				}
				if up.Count() != 5 {
					errs = append(errs, fmt.Sprintf("upstream saw %d requests, want 5 (4 of the burst + the probe)", up.Count()))
				}
				return append(errs, shapingMetrics(t, in, "max_waiting", 6, 1, 10)...)
			})
		})
	}
}

// TestShapingMaxWaitRefunds: max_wait 250ms. Of ten simultaneous
// requests, those waiting 0, 100 and 200 ms are served; every other one
// would wait ≥ 300 ms and is refused as shaping-queue-full and refunded
// (even interleaved with the others' decisions, the three served keep the
// excess at ≥ 2000 units, so the fourth-served wait would be ≥ 300 ms).
// The bucket then holds 2000 units at the burst: a request sent at tp =
// t0 + 150 ms waits (2000 + 1000)/10 − 150 = 150 ms, within max_wait;
// without the refunds it would have to wait 850 ms and be refused too.
func TestShapingMaxWaitRefunds(t *testing.T) {
	for _, st := range e2eStores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			coreRetryTimed(t, func() (errs []string) {
				in, up := e2eStart(t, st, shapingConfig("{ max_wait: 250ms }"))
				t0, ch := shapingBurst(t, in.URL+"/a", 10)
				var served []time.Duration
				refused := 0
				probed := false
				for range 10 {
					a := shapingNext(t, ch)
					switch {
					case a.status == http.StatusTooManyRequests && a.typ == shapingQueueFull:
						refused++
					case a.status == http.StatusOK:
						served = append(served, a.latency)
					default:
						errs = append(errs, fmt.Sprintf("burst answer %d %q", a.status, a.typ))
					}
					if probed || refused != 7 || len(served) != 2 {
						continue
					}
					// Every refusal is back (refunded), the 200 ms request
					// still waits: probe at t0 + 150 ms.
					probed = true
					time.Sleep(time.Until(t0.Add(150 * time.Millisecond)))
					tp := time.Now()
					p := shapingGet(http.DefaultClient, in.URL+"/a")
					if p.err != nil || p.status != http.StatusOK {
						errs = append(errs, fmt.Sprintf("probe at +%v: %d %q %v, want 200 after a wait (the refused requests' water would make it 850 ms, beyond max_wait)",
							tp.Sub(t0).Round(time.Millisecond), p.status, p.typ, p.err))
						continue
					}
					t.Logf("probe sent %v after the burst: waited %v, expected %v", tp.Sub(t0).Round(time.Millisecond),
						p.latency.Round(time.Millisecond), (300*time.Millisecond - tp.Sub(t0)).Round(time.Millisecond))
					errs = append(errs, shapingNear(fmt.Sprintf("probe sent %v after the burst: wait", tp.Sub(t0).Round(time.Millisecond)),
						p.latency, 300*time.Millisecond-tp.Sub(t0))...)
				}
				if len(served) != 3 || refused != 7 {
					errs = append(errs, fmt.Sprintf("burst of 10: %d served %v, %d shaping refusals; want 3 and 7", len(served), served, refused))
				}
				if !probed {
					errs = append(errs, "no probe sent")
				}
				if up.Count() != 4 {
					errs = append(errs, fmt.Sprintf("upstream saw %d requests, want 4 (3 of the burst + the probe)", up.Count()))
				}
				return append(errs, shapingMetrics(t, in, "max_wait", 7, 1, 10)...)
			})
		})
	}
}

// TestShapingRefusalHeaders: the quota headers of a shaping-cap refusal
// describe the bucket after its refund. Leaky bucket 1 r/s, burst 20
// (one request = 1000 units, draining 1 per ms), max_wait 1.5 s: two
// simultaneous requests leave excess 1000; a third ~50 ms later would wait
// ~1.95 s and is refused. Refunded, the bucket is at excess ~950: r = 19,
// t = 2 s (counting the refused request it would read r=18;t=3).
func TestShapingRefusalHeaders(t *testing.T) {
	for _, st := range e2eStores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			in, _ := e2eStart(t, st, `
server: { max_wait: 1500ms }
upstreams: { app: { url: %q } }
policies: { shape: { algorithm: leaky_bucket, rate: 1r/s, burst: 20, key: ip } }
routes: [ { name: all, upstream: app, policies: [shape] } ]
`)
			_, ch := shapingBurst(t, in.URL+"/a", 2)
			time.Sleep(50 * time.Millisecond)
			resp, body := rlproxytest.Get(t, nil, in.URL+"/a")
			if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, shapingQueueFull) {
				t.Fatalf("third request: %d %s, want a shaping-queue-full refusal", resp.StatusCode, body)
			}
			if got := resp.Header.Get("RateLimit"); got != `"shape";r=19;t=2` {
				t.Errorf("refusal RateLimit = %q, want %q (the refunded bucket)", got, `"shape";r=19;t=2`)
			}
			if got := resp.Header.Get("Retry-After"); got != "2" {
				t.Errorf("refusal Retry-After = %q, want 2 (its wait, ~1.95 s, rounded up)", got)
			}
			for range 2 {
				if a := shapingNext(t, ch); a.status != http.StatusOK {
					t.Errorf("burst request: status %d, want 200", a.status)
				}
			}
		})
	}
}
