package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/testutil/fakeclock"
	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// corePxBurst sends n simultaneous GETs (each on its own connection, all
// opened first) and returns the status counts.
func corePxBurst(t *testing.T, url string, n int) map[int]int {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}, Timeout: 20 * time.Second}
	defer c.CloseIdleConnections()
	var mu sync.Mutex
	codes := map[int]int{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			resp, err := c.Get(url)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				codes[-1]++
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[resp.StatusCode]++
		})
	}
	close(start)
	wg.Wait()
	return codes
}

// TestConcurrentBurstExact sends 50 simultaneous requests against limits
// that cannot refill during the test (fixed window 10 per hour; token bucket
// of 10 refilling 10 per hour, i.e. one per 6 minutes): exactly 10 pass and
// the upstream sees exactly 10, on the memory store and on a real Valkey
// (one atomic script per decision, so no check-then-set race).
func TestConcurrentBurstExact(t *testing.T) {
	e2eAwayFromBoundary(t, time.Hour, 10*time.Second)
	for _, st := range e2eStores {
		for _, pol := range []string{
			"{ algorithm: fixed_window, limit: 10, window: 1h, key: ip }",
			"{ algorithm: token_bucket, burst: 10, rate: 10r/h, key: ip }",
		} {
			name := st + "/" + strings.TrimSuffix(strings.Fields(pol)[2], ",")
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				up := rlproxytest.NewUpstream(t)
				in := rlproxytest.Start(t, storeYAML(t, st)+fmt.Sprintf(`
upstreams: { app: { url: %q } }
policies: { p: %s }
routes: [ { name: all, upstream: app, policies: [p] } ]
`, up.URL, pol))
				codes := corePxBurst(t, in.URL+"/x", 50)
				if codes[200] != 10 || codes[429] != 40 || len(codes) != 2 {
					t.Errorf("statuses %v, want exactly 10×200 and 40×429", codes)
				}
				if up.Count() != 10 {
					t.Errorf("upstream saw %d requests, want 10", up.Count())
				}
			})
		}
	}
}

// corePxRealIP starts rlproxy with the given real_ip section, a limit of
// one request per hour per client IP on every path, and a recording
// upstream.
func corePxRealIP(t *testing.T, realIP string) (*rlproxytest.Instance, *rlproxytest.Upstream) {
	t.Helper()
	e2eAwayFromBoundary(t, time.Hour, 10*time.Second)
	up := rlproxytest.NewUpstream(t)
	in := rlproxytest.Start(t, fmt.Sprintf(`
real_ip: %s
upstreams: { app: { url: %q } }
policies: { one: { algorithm: fixed_window, limit: 1, window: 1h, key: ip } }
routes: [ { name: all, upstream: app, policies: [one] } ]
`, realIP, up.URL))
	return in, up
}

// corePxGetXFF sends GET with one X-Forwarded-For line per element of xff
// and returns the status.
func corePxGetXFF(t *testing.T, url string, xff ...string) int {
	t.Helper()
	var h []string
	for _, v := range xff {
		h = append(h, "X-Forwarded-For", v)
	}
	resp, _ := rlproxytest.Get(t, nil, url, h...)
	return resp.StatusCode
}

// corePxLastXFF is the X-Forwarded-For the upstream received last (all lines).
func corePxLastXFF(t *testing.T, up *rlproxytest.Upstream) []string {
	t.Helper()
	reqs := up.Requests()
	if len(reqs) == 0 {
		t.Fatal("upstream received nothing")
	}
	return reqs[len(reqs)-1].Header.Values("X-Forwarded-For")
}

// TestRealIPSpoofing: a forged X-Forwarded-For from an untrusted peer
// neither picks the rate-limit key nor reaches the upstream; from a trusted
// peer the header picks the key per nginx realip (recursive or not, all
// header lines read) and the upstream gets the chain plus the peer.
func TestRealIPSpoofing(t *testing.T) {
	t.Run("untrusted_peer", func(t *testing.T) {
		t.Parallel()
		in, up := corePxRealIP(t, `{ header: X-Forwarded-For, trusted_proxies: [10.0.0.0/8], recursive: true }`)
		if got := corePxGetXFF(t, in.URL+"/a", "1.2.3.4"); got != 200 {
			t.Fatalf("first request: %d, want 200", got)
		}
		if got := corePxLastXFF(t, up); !slices.Equal(got, []string{"127.0.0.1"}) {
			t.Errorf("upstream X-Forwarded-For %q, want [127.0.0.1] (the forged 1.2.3.4 dropped)", got)
		}
		// Keyed by the peer 127.0.0.1: a different forged address is the same client.
		if got := corePxGetXFF(t, in.URL+"/a", "5.6.7.8"); got != 429 {
			t.Errorf("second request with another forged XFF: %d, want 429 (keyed by 127.0.0.1)", got)
		}
		// Another peer is another client.
		resp, _ := rlproxytest.Get(t, rlproxytest.ClientFrom("127.0.0.2"), in.URL+"/a", "X-Forwarded-For", "1.2.3.4")
		if resp.StatusCode != 200 {
			t.Errorf("request from 127.0.0.2: %d, want 200", resp.StatusCode)
		}
		if up.Count() != 2 {
			t.Errorf("upstream saw %d requests, want 2", up.Count())
		}
	})
	t.Run("trusted_peer_recursive", func(t *testing.T) {
		t.Parallel()
		in, up := corePxRealIP(t, `{ header: X-Forwarded-For, trusted_proxies: [127.0.0.1/32], recursive: true }`)
		if got := corePxGetXFF(t, in.URL+"/a", "9.9.9.9, 1.2.3.4"); got != 200 {
			t.Fatalf("first request: %d, want 200", got)
		}
		if got := corePxLastXFF(t, up); !slices.Equal(got, []string{"9.9.9.9, 1.2.3.4, 127.0.0.1"}) {
			t.Errorf("upstream X-Forwarded-For %q, want [9.9.9.9, 1.2.3.4, 127.0.0.1]", got)
		}
		if got := corePxGetXFF(t, in.URL+"/a", "1.2.3.4"); got != 429 {
			t.Errorf("XFF 1.2.3.4 after 9.9.9.9, 1.2.3.4: %d, want 429 (same key 1.2.3.4)", got)
		}
		if got := corePxGetXFF(t, in.URL+"/a", "5.6.7.8"); got != 200 {
			t.Errorf("XFF 5.6.7.8: %d, want 200 (another client)", got)
		}
	})
	// Both trusted networks: 10.1.1.1 is a trusted hop, so recursive
	// skips it and non-recursive stops at it.
	for _, rec := range []bool{true, false} {
		t.Run(fmt.Sprintf("recursive_%v", rec), func(t *testing.T) {
			t.Parallel()
			in, up := corePxRealIP(t, fmt.Sprintf(`{ header: X-Forwarded-For, trusted_proxies: [127.0.0.1/32, 10.0.0.0/8], recursive: %v }`, rec))
			if got := corePxGetXFF(t, in.URL+"/a", "9.9.9.9, 10.1.1.1"); got != 200 {
				t.Fatalf("first request: %d, want 200", got)
			}
			if got := corePxLastXFF(t, up); !slices.Equal(got, []string{"9.9.9.9, 10.1.1.1, 127.0.0.1"}) {
				t.Errorf("upstream X-Forwarded-For %q, want [9.9.9.9, 10.1.1.1, 127.0.0.1]", got)
			}
			// recursive: the key was 9.9.9.9; otherwise the rightmost, 10.1.1.1.
			want9, want10 := 429, 200
			if !rec {
				want9, want10 = 200, 429
			}
			if got := corePxGetXFF(t, in.URL+"/a", "9.9.9.9"); got != want9 {
				t.Errorf("XFF 9.9.9.9: %d, want %d", got, want9)
			}
			if got := corePxGetXFF(t, in.URL+"/a", "10.1.1.1"); got != want10 {
				t.Errorf("XFF 10.1.1.1: %d, want %d", got, want10)
			}
		})
	}
	t.Run("rightmost_non_recursive", func(t *testing.T) {
		t.Parallel()
		in, _ := corePxRealIP(t, `{ header: X-Forwarded-For, trusted_proxies: [127.0.0.1/32], recursive: false }`)
		if got := corePxGetXFF(t, in.URL+"/a", "9.9.9.9, 1.2.3.4"); got != 200 {
			t.Fatalf("first request: %d, want 200", got)
		}
		if got := corePxGetXFF(t, in.URL+"/a", "1.2.3.4"); got != 429 {
			t.Errorf("XFF 1.2.3.4: %d, want 429 (key = rightmost 1.2.3.4)", got)
		}
		if got := corePxGetXFF(t, in.URL+"/a", "9.9.9.9"); got != 200 {
			t.Errorf("XFF 9.9.9.9: %d, want 200", got)
		}
	})
	// Three header lines are one list: the first untrusted from the right
	// is 9.9.9.9 (reading only the first line would give 7.7.7.7, only the
	// last 10.1.1.1).
	t.Run("multi_line", func(t *testing.T) {
		t.Parallel()
		in, up := corePxRealIP(t, `{ header: X-Forwarded-For, trusted_proxies: [127.0.0.1/32, 10.0.0.0/8], recursive: true }`)
		if got := corePxGetXFF(t, in.URL+"/a", "7.7.7.7", "9.9.9.9", "10.1.1.1"); got != 200 {
			t.Fatalf("first request: %d, want 200", got)
		}
		if got := corePxLastXFF(t, up); !slices.Equal(got, []string{"7.7.7.7, 9.9.9.9, 10.1.1.1, 127.0.0.1"}) {
			t.Errorf("upstream X-Forwarded-For %q, want [7.7.7.7, 9.9.9.9, 10.1.1.1, 127.0.0.1]", got)
		}
		if got := corePxGetXFF(t, in.URL+"/a", "9.9.9.9"); got != 429 {
			t.Errorf("XFF 9.9.9.9: %d, want 429 (the key of the three-line request)", got)
		}
		for _, other := range []string{"7.7.7.7", "10.1.1.1"} {
			if got := corePxGetXFF(t, in.URL+"/a", other); got != 200 {
				t.Errorf("XFF %s: %d, want 200", other, got)
			}
		}
	})
}

// corePxQuotaHeaders lists every rate-limit header name a response may carry.
var corePxQuotaHeaders = []string{"RateLimit-Policy", "RateLimit", "RateLimit-Limit", "RateLimit-Remaining",
	"RateLimit-Reset", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"}

// corePxCheckHeaders compares exact header values; X-RateLimit-Reset
// (epoch seconds) must be within a second of now + resetIn.
func corePxCheckHeaders(t *testing.T, what string, h http.Header, want map[string]string, resetIn int64) {
	t.Helper()
	for k, v := range want {
		if got := h.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("%s: %s = %q, want exactly [%q]", what, k, got, v)
		}
	}
	now := time.Now().Unix()
	reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	if err != nil || reset < now+resetIn-1 || reset > now+resetIn+1 {
		t.Errorf("%s: X-RateLimit-Reset = %q, want epoch seconds in [%d, %d]", what, h.Get("X-RateLimit-Reset"), now+resetIn-1, now+resetIn+1)
	}
}

// TestResponseHeaders: with all three header sets configured, every
// response of a limited route carries exact values (the reference token
// bucket: 5, one token per 2 s), the 429 too; an unlimited route carries
// none of its own; an upstream's own quota headers are replaced on limited
// routes and passed through untouched on unlimited ones.
func TestResponseHeaders(t *testing.T) {
	t.Parallel()
	up := rlproxytest.NewUpstream(t)
	up.Handler = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("noisy") == "1" {
			w.Header().Set("RateLimit", `"upstream";r=99;t=1`)
			w.Header().Set("RateLimit-Policy", `"upstream";q=100;w=1`)
			w.Header().Set("X-RateLimit-Limit", "100")
			w.Header().Set("RateLimit-Reset", "1")
		}
		_, _ = io.WriteString(w, "ok")
	}
	in := rlproxytest.Start(t, fmt.Sprintf(`
upstreams: { app: { url: %q } }
policies:
  api: { algorithm: token_bucket, rate: 30r/m, burst: 5, key: ip }
routes:
  - { name: api, match: { path_prefix: /api/ }, upstream: app, policies: [api] }
  - { name: free, match: { path_prefix: /free/ }, upstream: app }
response:
  headers: [ratelimit, ratelimit-legacy, x-ratelimit]
`, up.URL))

	resp, _ := rlproxytest.Get(t, nil, in.URL+"/api/a?noisy=1")
	if resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	// One token spent of 5: full again in 2 s.
	corePxCheckHeaders(t, "200", resp.Header, map[string]string{
		"RateLimit-Policy":      `"api";q=5;w=10`,
		"RateLimit":             `"api";r=4;t=2`,
		"RateLimit-Limit":       "5",
		"RateLimit-Remaining":   "4",
		"RateLimit-Reset":       "2",
		"X-RateLimit-Limit":     "5",
		"X-RateLimit-Remaining": "4",
	}, 2)
	if v := resp.Header.Values("Retry-After"); len(v) != 0 {
		t.Errorf("200 carries Retry-After %q", v)
	}
	for range 4 {
		rlproxytest.Get(t, nil, in.URL+"/api/a")
	}
	resp, _ = rlproxytest.Get(t, nil, in.URL+"/api/a?noisy=1")
	if resp.StatusCode != 429 {
		t.Fatalf("sixth request: %d, want 429", resp.StatusCode)
	}
	corePxCheckHeaders(t, "429", resp.Header, map[string]string{
		"RateLimit-Policy":      `"api";q=5;w=10`,
		"RateLimit":             `"api";r=0;t=10`,
		"RateLimit-Limit":       "5",
		"RateLimit-Remaining":   "0",
		"RateLimit-Reset":       "10",
		"X-RateLimit-Limit":     "5",
		"X-RateLimit-Remaining": "0",
		"Retry-After":           "2",
	}, 10)

	// Unlimited route: no quota header of rlproxy's...
	resp, _ = rlproxytest.Get(t, nil, in.URL+"/free/a")
	for _, k := range corePxQuotaHeaders {
		if v := resp.Header.Values(k); len(v) != 0 {
			t.Errorf("unlimited route: %s = %q, want none", k, v)
		}
	}
	// ...and the upstream's own pass through as sent.
	resp, _ = rlproxytest.Get(t, nil, in.URL+"/free/a?noisy=1")
	for k, v := range map[string]string{"RateLimit": `"upstream";r=99;t=1`, "RateLimit-Policy": `"upstream";q=100;w=1`,
		"X-RateLimit-Limit": "100", "RateLimit-Reset": "1"} {
		if got := resp.Header.Values(k); !slices.Equal(got, []string{v}) {
			t.Errorf("unlimited route, upstream's own %s = %q, want [%q]", k, got, v)
		}
	}
	for _, k := range []string{"RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"} {
		if v := resp.Header.Values(k); len(v) != 0 {
			t.Errorf("unlimited route: %s = %q, want none", k, v)
		}
	}
}

// corePxProblem is the RFC 9457 body rlproxy answers in its own name.
type corePxProblem struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Status     int    `json:"status"`
	Detail     string `json:"detail"`
	Instance   string `json:"instance"`
	Policy     string `json:"policy"`
	RetryAfter *int64 `json:"retryAfter"`
	Limit      *int64 `json:"limit"`
	Remaining  *int64 `json:"remaining"`
	Reset      *int64 `json:"reset"`
	Window     *int64 `json:"window"`
	// Violated is draft-11's violated-policies (policy refusals only).
	Violated *[]string `json:"violated-policies"`
}

// corePxDecodeProblem checks the media type and decodes the body strictly.
func corePxDecodeProblem(t *testing.T, resp *http.Response, body string) corePxProblem {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	var p corePxProblem
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("decoding %q: %v", body, err)
	}
	return p
}

func corePxInt(p *int64) string {
	if p == nil {
		return "absent"
	}
	return strconv.FormatInt(*p, 10)
}

// TestProblemBodies: the refusal body is RFC 9457 problem+json with the
// rate-limit members (whole seconds, the binding policy); response.status
// changes the refusal status in line and body; no route is 404 and an
// unreachable upstream 502, both problem+json without rate-limit members.
func TestProblemBodies(t *testing.T) {
	for _, status := range []int{429, 503} {
		t.Run(fmt.Sprintf("refusal_%d", status), func(t *testing.T) {
			t.Parallel()
			up := rlproxytest.NewUpstream(t)
			in := rlproxytest.Start(t, fmt.Sprintf(`
upstreams: { app: { url: %q } }
policies:
  api: { algorithm: token_bucket, rate: 30r/m, burst: 5, key: ip }
routes:
  - { name: api, match: { path_prefix: /api/ }, upstream: app, policies: [api] }
response: { status: %d }
`, up.URL, status))
			for range 5 {
				rlproxytest.Get(t, nil, in.URL+"/api/items")
			}
			resp, body := rlproxytest.Get(t, nil, in.URL+"/api/items")
			if resp.StatusCode != status {
				t.Fatalf("status %d, want %d", resp.StatusCode, status)
			}
			if ra := resp.Header.Get("Retry-After"); ra != "2" {
				t.Errorf("Retry-After %q, want 2", ra)
			}
			p := corePxDecodeProblem(t, resp, body)
			want := corePxProblem{Type: "urn:rlproxy:problem:rate-limited", Title: "Too Many Requests", Status: status,
				Detail: `policy "api" allows 5 requests per 10 s; retry in 2 s`, Instance: "/api/items", Policy: "api"}
			got := p
			got.RetryAfter, got.Limit, got.Remaining, got.Reset, got.Window, got.Violated = nil, nil, nil, nil, nil, nil
			if got != want {
				t.Errorf("problem %+v, want %+v", got, want)
			}
			if p.Violated == nil || fmt.Sprint(*p.Violated) != "[api]" {
				t.Errorf("violated-policies %v, want [api]", p.Violated)
			}
			if s := strings.Join([]string{corePxInt(p.RetryAfter), corePxInt(p.Limit), corePxInt(p.Remaining), corePxInt(p.Reset), corePxInt(p.Window)}, " "); s != "2 5 0 10 10" {
				t.Errorf("retryAfter limit remaining reset window = %s, want 2 5 0 10 10", s)
			}
		})
	}
	t.Run("no_route_and_bad_gateway", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := l.Addr().String()
		l.Close() // nothing listens there now
		in := rlproxytest.Start(t, fmt.Sprintf(`
upstreams: { gone: { url: "http://%s" } }
routes:
  - { name: gone, match: { path_prefix: /gone/ }, upstream: gone }
`, closed))
		for _, c := range []struct {
			path, typ, title string
			status           int
		}{
			{"/nowhere", "urn:rlproxy:problem:no-route", "Not Found", 404},
			{"/gone/x", "urn:rlproxy:problem:bad-gateway", "Bad Gateway", 502},
		} {
			resp, body := rlproxytest.Get(t, nil, in.URL+c.path)
			if resp.StatusCode != c.status {
				t.Errorf("%s: status %d, want %d", c.path, resp.StatusCode, c.status)
				continue
			}
			p := corePxDecodeProblem(t, resp, body)
			if p.Type != c.typ || p.Title != c.title || p.Status != c.status || p.Instance != c.path || p.Detail == "" {
				t.Errorf("%s: problem %+v, want type %s, title %s, status %d, instance %s, a detail", c.path, p, c.typ, c.title, c.status, c.path)
			}
			if p.RetryAfter != nil || p.Limit != nil || p.Policy != "" {
				t.Errorf("%s: problem has rate-limit members: %+v", c.path, p)
			}
		}
	})
}

// TestLeakyDelay: leaky bucket rate 5r/s burst 3 in delay mode (nginx
// limit_req without nodelay). Four simultaneous requests (decided at one
// injected instant, however the machine spreads their arrival) are all
// served, after waits of exactly 0, 200, 400 and 600 ms (the access log's
// decided waits; the measured times are at least those); a client that
// gives up during its wait is never forwarded.
func TestLeakyDelay(t *testing.T) {
	const cfg = `
upstreams: { app: { url: %q } }
policies: { shape: { algorithm: leaky_bucket, rate: 5r/s, burst: 3, key: ip } }
routes: [ { name: all, upstream: app, policies: [shape] } ]
`
	for _, st := range e2eStores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			clk := fakeclock.New(time.Now())
			in, up := e2eStart(t, st, e2eAccessLog+cfg, rlproxytest.WithNow(clk.Now))
			served := corePxTimedBurst(t, in.URL+"/a", 4)
			if len(served) != 4 {
				t.Fatalf("%d of 4 served", len(served))
			}
			want := []int64{0, 200, 400, 600}
			if got := e2eWaits(t, in, "/a", 4); !slices.Equal(got, want) {
				t.Errorf("decided waits %v ms, want %v", got, want)
			}
			for i, w := range want {
				if served[i] < time.Duration(w)*time.Millisecond {
					t.Errorf("request %d served after %v, before its %d ms turn (all: %v)", i, served[i], w, served)
				}
			}
			if up.Count() != 4 {
				t.Errorf("upstream saw %d, want 4", up.Count())
			}
		})
		// A client that gives up while waiting its turn is never forwarded.
		// The delay histogram's count says when the request was given its
		// wait (a count only grows: no window to miss), and at 1 r/s its
		// 3 s wait leaves the cancellation no race.
		t.Run(st+"/disconnect", func(t *testing.T) {
			t.Parallel()
			in, up := e2eStart(t, st, strings.Replace(cfg, "rate: 5r/s", "rate: 1r/s", 1))
			metric := func(name string) func() float64 {
				return func() float64 {
					_, s := opsScrape(t, in)
					return opsValue(t, s, name)
				}
			}
			waiting, delayed := metric("rlproxy_waiting_requests"), metric("rlproxy_delay_seconds_count")
			var wg sync.WaitGroup
			for range 3 { // waits 0, 1, 2 s
				wg.Go(func() { rlproxytest.Get(t, nil, in.URL+"/a") })
			}
			waitfor.True(t, "two requests delayed", func() bool { return delayed() == 2 })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, in.URL+"/a", nil)
			sent := time.Now()
			done := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
					err = fmt.Errorf("answered %d after %v", resp.StatusCode, time.Since(sent))
				}
				done <- err
			}()
			waitfor.True(t, "the fourth request delayed", func() bool { return delayed() == 3 })
			cancel() // during its 3 s wait
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("the waiting request: %v, want the client's cancellation", err)
			}
			wg.Wait()
			// Its wait ended with the cancellation (the gauge drops when
			// the wait ends, before forwarding is decided): it is not
			// forwarded at its turn either.
			waitfor.True(t, "no request waiting", func() bool { return waiting() == 0 })
			if up.Count() != 3 {
				t.Errorf("upstream saw %d requests, want 3 (the abandoned one never forwarded)", up.Count())
			}
		})
	}
}

// corePxTimedBurst sends n simultaneous GETs over fresh connections and
// returns the served times (send to response headers) of the 200s, sorted.
func corePxTimedBurst(t *testing.T, url string, n int) []time.Duration {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}, Timeout: 20 * time.Second}
	defer c.CloseIdleConnections()
	var mu sync.Mutex
	var served []time.Duration
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			t0 := time.Now()
			resp, err := c.Get(url)
			if err != nil {
				t.Error(err)
				return
			}
			d := time.Since(t0)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				mu.Lock()
				served = append(served, d)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	slices.Sort(served)
	return served
}

// TestSeveralPolicies: a request refused by one policy of a route is charged
// by none (the RateLimit member of the other shows the same r before and
// after), on both stores; Retry-After is the longest wait among the refusing
// policies even when the binding policy (fewest remaining) waits less.
func TestSeveralPolicies(t *testing.T) {
	e2eAwayFromBoundary(t, time.Hour, 10*time.Second)
	for _, st := range e2eStores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			in, up := e2eStart(t, st, `
upstreams: { app: { url: %q } }
policies:
  a:  { algorithm: token_bucket, rate: 1r/m, burst: 2, key: ip }
  b:  { algorithm: fixed_window, limit: 5, window: 1h, key: ip }
  p1: { algorithm: token_bucket, rate: 1r/m, burst: 3, key: ip }
  p2: { algorithm: token_bucket, rate: 6r/m, burst: 2, key: ip }
routes:
  - { name: ab, match: { path_prefix: /ab/ }, upstream: app, policies: [a, b] }
  - { name: cost, match: { path_prefix: /cost/ }, upstream: app, policies: [p1, p2], cost: 2 }
`)
			var members []string
			var codes []int
			for range 4 {
				resp, _ := rlproxytest.Get(t, nil, in.URL+"/ab/x")
				codes = append(codes, resp.StatusCode)
				members = append(members, corePxMember(resp.Header.Get("RateLimit"), "b"))
			}
			if fmt.Sprint(codes) != "[200 200 429 429]" {
				t.Fatalf("statuses %v, want [200 200 429 429]", codes)
			}
			// b was charged twice: r=3 before and after a's refusals.
			for i, want := range []string{"4", "3", "3", "3"} {
				if !strings.HasPrefix(members[i], `"b";r=`+want+";") {
					t.Errorf("request %d: b's RateLimit member %q, want r=%s", i+1, members[i], want)
				}
			}
			if up.Count() != 2 {
				t.Errorf("upstream saw %d, want 2", up.Count())
			}

			// cost 2: the first request leaves p1 with 1 token (refill 60 s
			// each) and p2 empty (20 s per 2 tokens). The second is refused
			// by both: p2 binds (0 remaining), waiting 20 s; p1 needs 60 s.
			if resp, _ := rlproxytest.Get(t, nil, in.URL+"/cost/x"); resp.StatusCode != 200 {
				t.Fatalf("first cost-2 request: %d", resp.StatusCode)
			}
			resp, body := rlproxytest.Get(t, nil, in.URL+"/cost/x")
			if resp.StatusCode != 429 {
				t.Fatalf("second cost-2 request: %d, want 429", resp.StatusCode)
			}
			if ra := resp.Header.Get("Retry-After"); ra != "60" {
				t.Errorf("Retry-After %q, want 60 (p1's wait, the longest)", ra)
			}
			if rl := resp.Header.Get("RateLimit"); rl != `"p1";r=1;t=120, "p2";r=0;t=20` {
				t.Errorf("RateLimit %q, want %q", rl, `"p1";r=1;t=120, "p2";r=0;t=20`)
			}
			p := corePxDecodeProblem(t, resp, body)
			if p.Policy != "p2" || corePxInt(p.RetryAfter) != "60" {
				t.Errorf("problem names policy %q with retryAfter %s, want binding p2 and retryAfter 60", p.Policy, corePxInt(p.RetryAfter))
			}
		})
	}
}

// corePxMember returns the member of a RateLimit header value for policy name.
func corePxMember(v, name string) string {
	for m := range strings.SplitSeq(v, ",") {
		if m = strings.TrimSpace(m); strings.HasPrefix(m, strconv.Quote(name)+";") {
			return m
		}
	}
	return ""
}

// TestUpgradePassThrough: a WebSocket-style upgrade through a limited route
// reaches a hijacking upstream, and bytes flow both ways on the upgraded
// connection.
func TestUpgradePassThrough(t *testing.T) {
	t.Parallel()
	up := rlproxytest.NewUpstream(t)
	up.Handler = func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "want an upgrade", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nhello\n")
		_ = brw.Flush()
		// Echo lines until the client closes.
		for {
			line, err := brw.ReadString('\n')
			if err != nil {
				return
			}
			_, _ = brw.WriteString("echo " + line)
			_ = brw.Flush()
		}
	}
	in := rlproxytest.Start(t, fmt.Sprintf(`
upstreams: { app: { url: %q } }
policies: { api: { algorithm: token_bucket, rate: 10r/s, burst: 5, key: ip } }
routes: [ { name: ws, upstream: app, policies: [api] } ]
`, up.URL))
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(in.URL, "http://"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 || !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") {
		t.Fatalf("status %d Upgrade %q, want 101 websocket", resp.StatusCode, resp.Header.Get("Upgrade"))
	}
	if rl := resp.Header.Get("RateLimit"); rl != `"api";r=4;t=1` {
		t.Errorf("101 RateLimit %q, want %q", rl, `"api";r=4;t=1`)
	}
	for _, want := range []string{"hello\n", "echo one\n", "echo two\n"} {
		if want != "hello\n" {
			_, _ = io.WriteString(conn, strings.TrimPrefix(want, "echo "))
		}
		got, err := br.ReadString('\n')
		if err != nil || got != want {
			t.Fatalf("read %q (%v), want %q", got, err, want)
		}
	}
}

// TestGracefulShutdownWaiting: a request held in leaky-bucket delay when
// App.Shutdown starts still gets its 200 (after its turn), and Shutdown
// returns only after it was answered. Decisions are made at an injected
// time that does not move, so the wait decided is exactly 500 ms; the wait
// itself runs on a real timer.
func TestGracefulShutdownWaiting(t *testing.T) {
	t.Parallel()
	up := rlproxytest.NewUpstream(t)
	clk := fakeclock.New(time.Now())
	in := rlproxytest.Start(t, fmt.Sprintf(`
upstreams: { app: { url: %q } }
policies: { shape: { algorithm: leaky_bucket, rate: 2r/s, burst: 1, key: ip } }
routes: [ { name: all, upstream: app, policies: [shape] } ]
`, up.URL), rlproxytest.WithNow(clk.Now))
	if resp, _ := rlproxytest.Get(t, nil, in.URL+"/a"); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	var answered atomic.Int64 // ns since start when the waiting request was answered
	status := make(chan int, 1)
	start := time.Now()
	go func() {
		resp, err := http.Get(in.URL + "/a") // waits 500 ms for its turn
		if err != nil {
			t.Error(err)
			status <- -1
			return
		}
		resp.Body.Close()
		answered.Store(int64(time.Since(start)))
		status <- resp.StatusCode
	}()
	waitfor.True(t, "the second request given its wait", func() bool {
		_, s := opsScrape(t, in)
		return opsValue(t, s, "rlproxy_delay_seconds_count") == 1
	})
	_, s := opsScrape(t, in)
	if d := opsValue(t, s, "rlproxy_delay_seconds_sum"); d != 0.5 {
		t.Errorf("wait decided: %v s, want 0.5 (one request ahead at 2 r/s)", d)
	}
	// Shutdown starts while the request waits; neither it nor the answer
	// can come before the turn, and Shutdown must not need its timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := in.App.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	shutdownDone := time.Since(start)
	if got := <-status; got != 200 {
		t.Fatalf("waiting request: %d, want 200", got)
	}
	if at := time.Duration(answered.Load()); at < 500*time.Millisecond {
		t.Errorf("waiting request answered after %v, before its turn (500 ms)", at)
	}
	if shutdownDone < 500*time.Millisecond {
		t.Errorf("Shutdown returned after %v, before the waiting request's turn (500 ms)", shutdownDone)
	}
	if up.Count() != 2 {
		t.Errorf("upstream saw %d, want 2", up.Count())
	}
	if _, err := http.Get(in.URL + "/a"); err == nil {
		t.Error("a new request after Shutdown was served")
	}
}
