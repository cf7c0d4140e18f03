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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"rlproxy/internal/testutil/fakeclock"
	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// shapingQueueFull is the problem type of a shaping-cap refusal.
const shapingQueueFull = "urn:rlproxy:problem:shaping-queue-full"

// shapingConfig is a leaky bucket of 10 r/s, burst 20, in delay mode: a
// request arriving at excess X units (one request = 1000 units, draining
// 10 units per ms) waits X/10 ms, so n simultaneous requests from idle
// wait 0, 100, …, (n−1)·100 ms. server is the shaping caps.
//
// On valkey the bucket runs at 1 r/s (shapingScale 10: every time × 10,
// the same decisions): Valkey expires a bucket's state in real time, which
// the tests' injected clock does not move, and at 10 r/s a loaded machine
// took longer than the state's 400 ms between two decisions of one burst.
func shapingConfig(st, server string) string {
	rate := "10r/s"
	if shapingScale(st) != 1 {
		rate = "1r/s"
	}
	return `
server: ` + server + `
upstreams: { app: { url: %q } }
policies: { shape: { algorithm: leaky_bucket, rate: ` + rate + `, burst: 20, key: ip } }
routes: [ { name: all, upstream: app, policies: [shape] } ]
`
}

// shapingScale is how much slower shapingConfig's bucket runs on store st.
func shapingScale(st string) time.Duration {
	if st == "valkey" {
		return 10
	}
	return 1
}

// shapingAnswer is one response of a burst: its status and problem type
// ("" on a 200).
type shapingAnswer struct {
	status int
	typ    string
	err    error
}

// shapingGet sends one GET on c.
func shapingGet(c *http.Client, url string) shapingAnswer {
	resp, err := c.Get(url)
	if err != nil {
		return shapingAnswer{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	a := shapingAnswer{status: resp.StatusCode, err: err}
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
// client IP) and returns a channel that receives each answer as it arrives
// (buffered: n answers).
func shapingBurst(t *testing.T, url string, n int) <-chan shapingAnswer {
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
	close(start)
	return ch
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

// TestShapingMaxWaitingRefunds: max_waiting 3. Ten simultaneous requests,
// decided at one injected instant t0, are all accepted by the bucket
// (excess up to 9000 of 20000 units): one is served at once, three wait
// 100, 200 and 300 ms, six are refused as shaping-queue-full — and
// refunded, so the bucket holds the four accepted only: excess −1000 +
// 4·1000 = 3000 units at the burst, draining 10 per ms. The waits are
// served on the same fake clock (rlproxytest.WithSleep), so the three stay
// held however long the burst takes to arrive in real time. Once the clock
// reaches the first held request's turn, t0 + 100 ms, it is back (a waiting
// slot is free), and a probe decided then waits (3000 + 1000)/10 − 100 =
// 300 ms; without the refunds it would wait 900 ms. (Which three hold a
// slot depends on the order they claim one, not the order they were decided
// in — on Valkey a pipelined batch's answers wake them in any order — so the
// first turn may be a later one, d: the probe then waits 400 ms − d.)
func TestShapingMaxWaitingRefunds(t *testing.T) {
	for _, st := range e2eStores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			clk := fakeclock.New(time.Now())
			x := shapingScale(st)
			in, up := e2eStart(t, st, e2eAccessLog+shapingConfig(st, "{ max_waiting: 3 }"),
				rlproxytest.WithNow(clk.Now), rlproxytest.WithSleep(clk.Sleep))
			ch := shapingBurst(t, in.URL+"/a", 10)
			ok, refused := shapingTally(t, ch, 7)
			if ok != 1 || refused != 6 {
				t.Errorf("burst of 10 at t0: %d served, %d shaping refusals; want 1 and 6 (3 held)", ok, refused)
			}
			waitfor.True(t, "three burst requests held", func() bool { return clk.Sleepers() == 3 })
			first, _ := clk.Next()
			clk.Advance(first)
			if ok, _ := shapingTally(t, ch, 1); ok != 1 {
				t.Errorf("the request held %v not served once the clock reached it", first)
			}
			probe := make(chan shapingAnswer, 1)
			go func() { probe <- shapingGet(http.DefaultClient, in.URL+"/probe") }()
			waitfor.True(t, "the probe held with the other two", func() bool { return clk.Sleepers() == 3 })
			// Past every wait this burst can have been granted (at most 9
			// turns), so the rest of the burst and the probe go on.
			clk.Advance(time.Second * x)
			if ok, _ := shapingTally(t, ch, 2); ok != 2 {
				t.Errorf("%d of the last two held requests served, want 2", ok)
			}
			if p := shapingNext(t, probe); p.status != http.StatusOK {
				t.Errorf("probe: %d %q, want 200 after a wait", p.status, p.typ)
			}
			// The burst's own waits depend on how its decisions and refunds
			// interleave; the probe's comes after all of them.
			if got, want := e2eWaits(t, in, "/probe", 11), []int64{int64(400*x) - first.Milliseconds()}; !slices.Equal(got, want) {
				t.Errorf("the probe's decided wait %v ms, want %v (refunds applied)", got, want)
			}
			if up.Count() != 5 {
				t.Errorf("upstream saw %d requests, want 5 (4 of the burst + the probe)", up.Count())
			}
			for _, e := range shapingMetrics(t, in, "max_waiting", 6, 1, 10) {
				t.Error(e)
			}
		})
	}
}

// shapingTally receives n burst answers and counts the 200s and the
// shaping-queue-full refusals among them; any other answer fails t.
func shapingTally(t *testing.T, ch <-chan shapingAnswer, n int) (ok, refused int) {
	t.Helper()
	for range n {
		switch a := shapingNext(t, ch); {
		case a.status == http.StatusTooManyRequests && a.typ == shapingQueueFull:
			refused++
		case a.status == http.StatusOK:
			ok++
		default:
			t.Errorf("burst answer %d %q", a.status, a.typ)
		}
	}
	return ok, refused
}

// TestShapingMaxWaitRefunds: max_wait 250ms. Of ten simultaneous requests
// decided at one injected instant t0, those waiting 0, 100 and 200 ms are
// served; every other one would wait ≥ 300 ms and is refused as
// shaping-queue-full and refunded. The bucket then holds 2000 units at the
// burst: a request decided at t0 + 150 ms waits (2000 + 1000)/10 − 150 =
// 150 ms, within max_wait; without the refunds it would have to wait 850
// ms and be refused too.
func TestShapingMaxWaitRefunds(t *testing.T) {
	for _, st := range e2eStores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			clk := fakeclock.New(time.Now())
			x := shapingScale(st)
			in, up := e2eStart(t, st, e2eAccessLog+shapingConfig(st, fmt.Sprintf("{ max_wait: %v }", 250*time.Millisecond*x)), rlproxytest.WithNow(clk.Now))
			ch := shapingBurst(t, in.URL+"/a", 10)
			var ok, refused int
			probed := false
			for range 10 {
				a := shapingNext(t, ch)
				switch {
				case a.status == http.StatusTooManyRequests && a.typ == shapingQueueFull:
					refused++
				case a.status == http.StatusOK:
					ok++
				default:
					t.Errorf("burst answer %d %q", a.status, a.typ)
				}
				if probed || refused != 7 {
					continue
				}
				// Every refusal is back (refunded): probe at t0 + 150 ms.
				probed = true
				clk.Advance(150 * time.Millisecond * x)
				if p := shapingGet(http.DefaultClient, in.URL+"/probe"); p.err != nil || p.status != http.StatusOK {
					t.Errorf("probe at t0 + 150 ms: %d %q %v, want 200 after a wait (the refused requests' water would make it 850 ms, beyond max_wait)",
						p.status, p.typ, p.err)
				}
			}
			if ok != 3 || refused != 7 {
				t.Errorf("burst of 10: %d served, %d shaping refusals; want 3 and 7", ok, refused)
			}
			if !probed {
				t.Error("no probe sent")
			}
			if got, want := e2eWaits(t, in, "/probe", 11), []int64{int64(150 * x)}; !slices.Equal(got, want) {
				t.Errorf("the probe's decided wait %v ms, want %v (refunds applied)", got, want)
			}
			if up.Count() != 4 {
				t.Errorf("upstream saw %d requests, want 4 (3 of the burst + the probe)", up.Count())
			}
			for _, e := range shapingMetrics(t, in, "max_wait", 7, 1, 10) {
				t.Error(e)
			}
		})
	}
}

// TestShapingRefusalHeaders: the quota headers of a shaping-cap refusal
// describe the bucket after its refund. Leaky bucket 1 r/s, burst 20
// (one request = 1000 units, draining 1 per ms), max_wait 1.5 s: two
// simultaneous requests leave excess 1000; a third decided 50 ms later (an
// injected clock) would wait 1.95 s and is refused. Refunded, the bucket is
// at excess 950: r = 19, t = 2 s (counting the refused request it would
// read r=18;t=3).
func TestShapingRefusalHeaders(t *testing.T) {
	for _, st := range e2eStores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			clk := fakeclock.New(time.Now())
			in, _ := e2eStart(t, st, `
server: { max_wait: 1500ms }
upstreams: { app: { url: %q } }
policies: { shape: { algorithm: leaky_bucket, rate: 1r/s, burst: 20, key: ip } }
routes: [ { name: all, upstream: app, policies: [shape] } ]
`, rlproxytest.WithNow(clk.Now))
			ch := shapingBurst(t, in.URL+"/a", 2)
			// Both decided: one served, one given its 1 s wait (the delay
			// histogram's count only grows: no window to miss).
			waitfor.True(t, "the burst decided", func() bool {
				_, s := opsScrape(t, in)
				return opsValue(t, s, "rlproxy_delay_seconds_count") == 1
			})
			clk.Advance(50 * time.Millisecond)
			resp, body := rlproxytest.Get(t, nil, in.URL+"/a")
			if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, shapingQueueFull) {
				t.Fatalf("third request: %d %s, want a shaping-queue-full refusal", resp.StatusCode, body)
			}
			if got := resp.Header.Get("RateLimit"); got != `"shape";r=19;t=2` {
				t.Errorf("refusal RateLimit = %q, want %q (the refunded bucket)", got, `"shape";r=19;t=2`)
			}
			if got := resp.Header.Get("Retry-After"); got != "2" {
				t.Errorf("refusal Retry-After = %q, want 2 (its wait, 1.95 s, rounded up)", got)
			}
			for range 2 {
				if a := shapingNext(t, ch); a.status != http.StatusOK {
					t.Errorf("burst request: status %d, want 200", a.status)
				}
			}
		})
	}
}
