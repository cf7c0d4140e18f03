package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"rlproxy/internal/testutil/fakeclock"
	"rlproxy/internal/testutil/fleet"
	"rlproxy/internal/testutil/redisserver"
	"rlproxy/internal/testutil/rlproxytest"
)

// settleLogin answers 401 to /login?fail, 200 otherwise (after hold, so
// that concurrent logins overlap).
func settleLogin(hold time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(hold)
		if r.URL.Query().Has("fail") {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("welcome"))
	}
}

const settleConfig = `
upstreams: { app: { url: %q } }
policies:
  failures: { algorithm: fixed_window, limit: 3, window: 1m, key: ip, count_status: [401] }
routes:
  - { name: login, match: { path: /login }, upstream: app, policies: [failures] }
`

// TestCountStatusSequential: count_status [401], 3 per minute. Five
// successful logins and then three failed ones pass (only failures are
// counted); the next request, failing or not, is refused without reaching
// the upstream. Memory and Valkey alike, on injected time (no window
// boundary can fall inside the test).
func TestCountStatusSequential(t *testing.T) {
	for _, st := range e2eStores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			up := rlproxytest.NewUpstream(t)
			up.Handler = settleLogin(0)
			clk := fakeclock.New(time.Now().Truncate(time.Minute).Add(10 * time.Second))
			in := rlproxytest.Start(t, storeYAML(t, st)+fmt.Sprintf(settleConfig, up.URL), rlproxytest.WithNow(clk.Now))
			c := rlproxytest.ClientFrom("127.0.0.31")
			var got []int
			for _, q := range []string{"", "", "", "", "", "?fail", "?fail", "?fail", "", "?fail"} {
				resp, _ := rlproxytest.Get(t, c, in.URL+"/login"+q)
				got = append(got, resp.StatusCode)
			}
			if fmt.Sprint(got) != "[200 200 200 200 200 401 401 401 429 429]" {
				t.Errorf("statuses %v, want 5×200, 3×401, then 429 for a success and a failure", got)
			}
			if n := up.Count(); n != 8 {
				t.Errorf("upstream saw %d requests, want 8 (the refused ones never reach it)", n)
			}
			// The next window counts afresh.
			clk.Advance(time.Minute)
			if resp, _ := rlproxytest.Get(t, c, in.URL+"/login?fail"); resp.StatusCode != 401 {
				t.Errorf("next window: %d, want 401 (admitted)", resp.StatusCode)
			}
		})
	}
}

// TestCountStatusFleet: three rlproxy processes sharing one real
// redis-server; one client's logins, 9 failing of every 10, sent 10 at a
// time spread over the instances, three rounds: the reservations keep the
// failures the upstream answered at 3 or fewer in the window across the
// fleet. A client that only succeeds, one request at a time, is never
// refused. Real time (separate processes): the test takes about 1 s and
// keeps 10 s from the minute window's boundary.
func TestCountStatusFleet(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	up := rlproxytest.NewUpstream(t)
	up.Handler = settleLogin(50 * time.Millisecond)
	f := fleet.Start(t, 3, fmt.Sprintf(`store: { type: valkey, valkey: { addrs: [%q], timeout: 2s } }`, srv.Addr)+
		fmt.Sprintf(settleConfig, up.URL))
	urls := []string{f.URL(0), f.URL(1), f.URL(2)}
	e2eAwayFromBoundary(t, time.Minute, 10*time.Second)
	attacker := rlproxytest.ClientFrom("127.0.0.32")
	codes := map[int]int{}
	for range 3 {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				q := "?fail"
				if i == 0 {
					q = ""
				}
				code := 0
				if resp, err := attacker.Get(urls[i%3] + "/login" + q); err == nil {
					code = resp.StatusCode
					resp.Body.Close()
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	t.Logf("30 logins over the fleet: %v; upstream saw %d", codes, up.Count())
	if codes[401] > 3 || codes[401] < 1 || codes[0] != 0 || codes[200]+codes[401]+codes[429] != 30 {
		t.Errorf("30 logins (27 failing): statuses %v, want at most 3×401 (the rest 200 or 429, no errors)", codes)
	}
	fails := 0
	for _, r := range up.Requests() {
		if strings.Contains(r.URL.RawQuery, "fail") {
			fails++
		}
	}
	if fails > 3 {
		t.Errorf("the upstream answered %d failed logins, want at most 3", fails)
	}
	user := rlproxytest.ClientFrom("127.0.0.33")
	for i := range 10 {
		if resp, err := user.Get(urls[i%3] + "/login"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("succeeding client, login %d: %v %v, want 200", i+1, err, resp)
		} else {
			resp.Body.Close()
		}
	}
}

// TestResponseCost: cost_response_header X-Tokens-Used on a token bucket
// of 100 at 1 r/s. The upstream reports 40 tokens per response — as a
// header, or as a trailer of a chunked response (announced, or sent
// unannounced). Four sequential requests: 1–3 pass, the 4th is refused
// without reaching the upstream, with Retry-After 21 (the debt of 20
// repaid, then one token for a request of cost 1). A response without a
// usable value keeps the up-front cost and is counted in
// rlproxy_cost_header_invalid_total. Memory and Valkey alike, on injected
// time.
func TestResponseCost(t *testing.T) {
	for _, st := range e2eStores {
		for _, how := range []string{"header", "trailer", "unannounced-trailer"} {
			t.Run(st+"/"+how, func(t *testing.T) {
				t.Parallel()
				up := rlproxytest.NewUpstream(t)
				up.Handler = func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Query().Has("bad") {
						w.Header().Set("X-Tokens-Used", "forty")
						return
					}
					switch how {
					case "header":
						w.Header().Set("X-Tokens-Used", "40")
						_, _ = w.Write([]byte("answer"))
					case "trailer":
						w.Header().Set("Trailer", "X-Tokens-Used")
						_, _ = w.Write([]byte("answer"))
						w.(http.Flusher).Flush() // chunked: the usage is known at the end
						w.Header().Set("X-Tokens-Used", "40")
					default:
						_, _ = w.Write([]byte("answer"))
						w.(http.Flusher).Flush()
						w.Header().Set(http.TrailerPrefix+"X-Tokens-Used", "40")
					}
				}
				clk := fakeclock.New(time.Now())
				in := rlproxytest.Start(t, storeYAML(t, st)+fmt.Sprintf(`
upstreams: { app: { url: %q } }
policies:
  tokens: { algorithm: token_bucket, rate: 1r/s, burst: 100, key: ip }
routes:
  - { name: llm, match: { path_prefix: /v1/ }, upstream: app, policies: [tokens], cost_response_header: X-Tokens-Used }
`, up.URL), rlproxytest.WithNow(clk.Now))
				c := rlproxytest.ClientFrom("127.0.0.41")
				var got []int
				var last *http.Response
				for range 4 {
					resp, body := rlproxytest.Get(t, c, in.URL+"/v1/chat")
					got = append(got, resp.StatusCode)
					if resp.StatusCode == 200 && body != "answer" {
						t.Errorf("body %q", body)
					}
					last = resp
				}
				if fmt.Sprint(got) != "[200 200 200 429]" || last.Header.Get("Retry-After") != "21" {
					t.Errorf("statuses %v, Retry-After %q; want [200 200 200 429] and 21", got, last.Header.Get("Retry-After"))
				}
				if n := up.Count(); n != 3 {
					t.Errorf("upstream saw %d requests, want 3", n)
				}
				// A malformed value: the up-front cost (1) stands, counted.
				other := rlproxytest.ClientFrom("127.0.0.42")
				rlproxytest.Get(t, other, in.URL+"/v1/chat?bad")
				if resp, _ := rlproxytest.Get(t, other, in.URL+"/v1/chat?bad"); resp.Header.Get("RateLimit") != `"tokens";r=98;t=2` {
					t.Errorf("after a malformed cost: RateLimit %q, want r=98 (1 charged each)", resp.Header.Get("RateLimit"))
				}
				_, s := opsScrape(t, in)
				if n := opsValue(t, s, "rlproxy_cost_header_invalid_total", "route", "llm"); n != 2 {
					t.Errorf("rlproxy_cost_header_invalid_total = %v, want 2", n)
				}
			})
		}
	}
}
