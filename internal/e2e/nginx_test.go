package e2e

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"rlproxy/internal/testutil/fakeclock"
	"rlproxy/internal/testutil/nginxtest"
	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// coreNginxCase is one limit_req configuration and the traffic sent to it.
type coreNginxCase struct {
	name string
	rate string // nginx and rlproxy spelling alike: "10r/s", "30r/m"
	// limitReq is the rest of nginx's `limit_req zone=z ...` directive;
	// policy is the same setting as rlproxy leaky_bucket fields.
	limitReq, policy string
	steps            []coreNginxStep
	// timed: compare waits (delay mode), not only statuses.
	timed bool
}

// coreNginxStep sends n simultaneous requests at offset at. want is the
// number of 200s the nginx arithmetic gives; waits (timed cases) are the
// delays of the accepted ones in ms, ascending.
type coreNginxStep struct {
	at    time.Duration
	n     int
	want  int
	waits []int
}

// coreNginxResult is one request's outcome.
type coreNginxResult struct {
	status int
}

// TestNginxDifferential runs the same limit_req settings in a real nginx
// (limit_req_zone $binary_remote_addr, limit_req_status 429, proxy_pass to a
// recording upstream) and in rlproxy (leaky_bucket, key ip; memory store and
// a real redis-server, so the Go arithmetic and the Lua script are both
// checked). The expected figures below are nginx's arithmetic at the
// scheduled times. rlproxy decides at an injected clock set to each step's
// time, so its statuses and decided waits must equal them exactly. nginx's
// clock cannot be injected: it gets the schedule in real time, and its
// answers must equal the same arithmetic (coreNginxModel, after
// ngx_http_limit_req_module) run at the arrival times its access log
// records — on an idle machine those are the scheduled ones, on a loaded one
// the arithmetic follows the spread, never a retry. Upstreams see exactly
// the accepted requests.
//
// Cases (nginx units: 1 request = 1000 "excess" units; rate r/s leaks
// r units per ms; the first request from idle sets excess 0):
//   - 10r/s burst=20 nodelay: 50 simultaneous → 21 accepted. 2650 ms later
//     (idle since 2100 ms) 25 simultaneous → 21 again.
//   - 30r/m burst=5 nodelay (1 request per 2 s): 8 quick → 6 accepted; then
//     single requests at 1000 (excess would be 5500: 429), 2500 (4750: 200),
//     3000 (5500: 429), 5000 (4500: 200), 5200 (5400: 429).
//   - 2r/s, no burst (one request per 500 ms): requests at 0, 200, 400, 650,
//     900, 1300, 1450, 1700, 1950 ms: 200 429 429 200 429 200 429 429 200.
//   - 10r/s burst=5, delay mode: 8 simultaneous → 6 served after 0, 100, …,
//     500 ms, 2 refused; at 1500 ms (idle) one served at once, at 1520 ms one
//     waits 80 ms (excess 800); at 1700 ms three wait 0, 100, 200 ms.
//   - 5r/s burst=10 delay=3: 13 simultaneous → 11 served, the first four at
//     once, then 200 ms apart up to 1400 ms; 2 refused. At 1000 ms (excess
//     5000) three more wait 600, 800, 1000 ms.
//
// Simultaneous requests have no order, so a step compares counts and the
// sorted waits.
func TestNginxDifferential(t *testing.T) {
	if nginxtest.Binary() == "" && os.Getenv("RLPROXY_REQUIRE_NGINX") != "1" {
		t.Skip("skipping: nginx not installed") // nginxtest.Start fails instead under RLPROXY_REQUIRE_NGINX=1
	}
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	cases := []coreNginxCase{
		{
			name: "10rps_burst20_nodelay", rate: "10r/s",
			limitReq: "burst=20 nodelay", policy: "burst: 20, nodelay: true",
			steps: []coreNginxStep{{at: 0, n: 50, want: 21}, {at: ms(2650), n: 25, want: 21}},
		},
		{
			name: "30rpm_burst5_nodelay", rate: "30r/m",
			limitReq: "burst=5 nodelay", policy: "burst: 5, nodelay: true",
			steps: []coreNginxStep{
				{at: 0, n: 8, want: 6}, {at: ms(1000), n: 1, want: 0}, {at: ms(2500), n: 1, want: 1},
				{at: ms(3000), n: 1, want: 0}, {at: ms(5000), n: 1, want: 1}, {at: ms(5200), n: 1, want: 0},
			},
		},
		{
			name: "2rps_noburst", rate: "2r/s",
			limitReq: "", policy: "burst: 0",
			steps: []coreNginxStep{
				{at: 0, n: 1, want: 1}, {at: ms(200), n: 1, want: 0}, {at: ms(400), n: 1, want: 0},
				{at: ms(650), n: 1, want: 1}, {at: ms(900), n: 1, want: 0}, {at: ms(1300), n: 1, want: 1},
				{at: ms(1450), n: 1, want: 0}, {at: ms(1700), n: 1, want: 0}, {at: ms(1950), n: 1, want: 1},
			},
		},
		{
			name: "10rps_burst5_delay", rate: "10r/s", timed: true,
			limitReq: "burst=5", policy: "burst: 5",
			steps: []coreNginxStep{
				{at: 0, n: 8, want: 6, waits: []int{0, 100, 200, 300, 400, 500}},
				{at: ms(1500), n: 1, want: 1, waits: []int{0}},
				{at: ms(1520), n: 1, want: 1, waits: []int{80}},
				{at: ms(1700), n: 3, want: 3, waits: []int{0, 100, 200}},
			},
		},
		{
			name: "5rps_burst10_delay3", rate: "5r/s", timed: true,
			limitReq: "burst=10 delay=3", policy: "burst: 10, delay: 3",
			steps: []coreNginxStep{
				{at: 0, n: 13, want: 11, waits: []int{0, 0, 0, 0, 200, 400, 600, 800, 1000, 1200, 1400}},
				{at: ms(1000), n: 3, want: 3, waits: []int{600, 800, 1000}},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			coreNginxReference(t, c)
			for _, st := range e2eStores {
				t.Run(st, func(t *testing.T) { coreNginxRlproxy(t, c, st) })
			}
		})
	}
}

// coreNginxReference sends c's schedule to a real nginx in real time and
// checks its answers against coreNginxModel at the arrival times nginx
// logged: the statuses of each step exactly, and each accepted request
// served no earlier than its modelled delay.
func coreNginxReference(t *testing.T, c coreNginxCase) {
	maxN, total := 0, 0
	for _, s := range c.steps {
		maxN, total = max(maxN, s.n), total+s.n
	}
	up := rlproxytest.NewUpstream(t)
	ngx := nginxtest.Start(t, fmt.Sprintf(`
    limit_req_zone $binary_remote_addr zone=z:1m rate=%s;
    limit_req_status 429;
    log_format lim '$msec $request_time $status $request_uri';
    server {
        listen {{listen}};
        keepalive_requests 10000;
        location = /warm { return 200 "warm"; }
        location / {
            limit_req zone=z %s;
            access_log lim.log lim;
            proxy_pass %s;
        }
    }`, c.rate, c.limitReq, up.URL))
	// Open maxN keep-alive connections first, so a simultaneous step is
	// not spread out by TCP handshakes.
	client := &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: maxN, DisableCompression: true},
		Timeout:   20 * time.Second,
	}
	t.Cleanup(client.CloseIdleConnections)
	var wg sync.WaitGroup
	for range maxN {
		wg.Go(func() {
			if r := coreNginxDo(client, ngx.URL+"/warm"); r.status != 200 {
				t.Errorf("nginx: warm-up status %d", r.status)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	res := make([][]coreNginxResult, len(c.steps))
	var mu sync.Mutex
	base := time.Now().Add(50 * time.Millisecond)
	for i, s := range c.steps {
		for range s.n {
			wg.Go(func() {
				time.Sleep(time.Until(base.Add(s.at))) // the schedule itself, not a wait for the system
				r := coreNginxDo(client, fmt.Sprintf("%s/lim?s=%d", ngx.URL, i))
				mu.Lock()
				res[i] = append(res[i], r)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	reqs := coreNginxLog(t, filepath.Join(ngx.Dir, "lim.log"), total)
	want := coreNginxModel(t, c, reqs)
	accepted := 0
	for i, s := range c.steps {
		var got []int64 // nginx's request times of its accepted requests, ms
		for _, r := range reqs {
			if r.step == i && r.status == 200 {
				got = append(got, r.took)
			}
		}
		slices.Sort(got)
		accepted += len(got)
		if answered, logged := coreNginxStatuses(coreNginxSorted(res[i])), coreNginxStatuses(coreNginxPlanned(s.n, len(got))); answered != logged {
			t.Errorf("nginx step %d: answered %s, logged %s", i, answered, logged)
		}
		if len(got) != len(want[i]) {
			t.Errorf("nginx step %d (at %v, %d requests): %d accepted, the model at its logged arrival times %d (arrivals %s)",
				i, s.at, s.n, len(got), len(want[i]), coreNginxArrivals(reqs))
			continue
		}
		if len(got) != s.want {
			t.Logf("nginx step %d: arrivals spread by the machine's load, %d accepted (the model agrees; %d on schedule)", i, len(got), s.want)
		}
		for j, d := range want[i] {
			if got[j] < d-1 { // nginx's log times are whole ms
				t.Errorf("nginx step %d: accepted request %d served after %d ms, before its modelled delay %d ms", i, j, got[j], d)
			}
		}
	}
	if n := up.Count(); n != accepted {
		t.Errorf("nginx: upstream saw %d requests, want %d (the accepted ones)", n, accepted)
	}
}

// coreNginxReq is one /lim request as nginx logged it.
type coreNginxReq struct {
	at, took int64 // arrival (Unix ms) and request time (ms)
	step     int
	status   int
}

// coreNginxArrivals lists reqs as step:status@ms after the first arrival,
// for a failure message.
func coreNginxArrivals(reqs []coreNginxReq) string {
	first := slices.MinFunc(reqs, func(a, b coreNginxReq) int { return cmp.Compare(a.at, b.at) }).at
	var b strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&b, " %d:%d@%d", r.step, r.status, r.at-first)
	}
	return b.String()
}

// coreNginxLog waits for n lines in nginx's access log file ("$msec
// $request_time $status $request_uri", both times with millisecond
// resolution) and parses them.
func coreNginxLog(t *testing.T, file string, n int) []coreNginxReq {
	t.Helper()
	waitfor.True(t, fmt.Sprintf("%d nginx access log lines", n), func() bool {
		b, _ := os.ReadFile(file)
		return strings.Count(string(b), "\n") >= n
	})
	b, _ := os.ReadFile(file)
	var reqs []coreNginxReq
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var msec, took string
		var r coreNginxReq
		if _, err := fmt.Sscanf(l, "%s %s %d /lim?s=%d", &msec, &took, &r.status, &r.step); err != nil {
			t.Fatalf("nginx access log line %q: %v", l, err)
		}
		end, err1 := strconv.ParseInt(strings.Replace(msec, ".", "", 1), 10, 64)
		d, err2 := strconv.ParseInt(strings.Replace(took, ".", "", 1), 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("nginx access log line %q: times not in ms", l)
		}
		r.at, r.took = end-d, d
		reqs = append(reqs, r)
	}
	return reqs
}

// coreNginxModel runs nginx's limit_req arithmetic (ngx_http_limit_req_module:
// excess = excess − rate·ms/1000 + 1000, floored at 0; refused above the
// burst; a delay of (excess − delay)·1000/rate ms above the delay
// threshold) over reqs in arrival order and returns, per step, the
// delays of the accepted requests in ms, ascending.
func coreNginxModel(t *testing.T, c coreNginxCase, reqs []coreNginxReq) [][]int64 {
	t.Helper()
	var n int64
	var unit string
	if _, err := fmt.Sscanf(strings.Replace(c.rate, "r/", " ", 1), "%d %s", &n, &unit); err != nil {
		t.Fatalf("rate %q: %v", c.rate, err)
	}
	rate := n * 1000 / map[string]int64{"s": 1, "m": 60}[unit] // nginx's unit: requests per 1000 s
	burst, delay := int64(0), int64(0)
	for _, f := range strings.Fields(c.limitReq) {
		switch k, v, _ := strings.Cut(f, "="); k {
		case "burst":
			b, _ := strconv.ParseInt(v, 10, 64)
			burst = b * 1000
		case "delay":
			d, _ := strconv.ParseInt(v, 10, 64)
			delay = d * 1000
		case "nodelay":
			delay = math.MaxInt64
		}
	}
	// Arrival order; within one millisecond, the accepted first: a refusal
	// leaves the state as it was, so at the same instant nothing refused can
	// be followed by an acceptance, and that is the order nginx took.
	sorted := slices.Clone(reqs)
	slices.SortStableFunc(sorted, func(a, b coreNginxReq) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.status, b.status))
	})
	out := make([][]int64, len(c.steps))
	var excess, last int64
	for k, r := range sorted {
		e := int64(0)
		if k > 0 {
			e = max(excess-rate*max(r.at-last, 0)/1000+1000, 0)
			if e > burst {
				continue
			}
		}
		excess, last = e, max(last, r.at)
		w := int64(0)
		if e > delay {
			w = (e - delay) * 1000 / rate
		}
		out[r.step] = append(out[r.step], w)
	}
	for _, d := range out {
		slices.Sort(d)
	}
	return out
}

// coreNginxRlproxy sends c's schedule to rlproxy on store st at an injected
// clock, each step decided at its scheduled time, and wants nginx's
// arithmetic exactly: each step's statuses and, in delay mode, the waits
// rlproxy decided (its access log), plus an upstream that saw exactly the
// accepted requests.
//
// Valkey expires a bucket's state in real time (PEXPIRE, the time the state
// takes to drain), which an injected clock does not move: a test slower in
// real time than its schedule would find the state gone. So on valkey the
// schedule runs slower in injected time — rate ÷ scale, offsets and waits ×
// scale, the same decisions — and the state outlives the real time between
// two steps by scale times the schedule's own gaps: scale 100, or less so
// that the longest wait stays within 15 s.
func coreNginxRlproxy(t *testing.T, c coreNginxCase, st string) {
	scale := int64(1)
	rate := c.rate
	if st == "valkey" {
		longest := 1
		for _, s := range c.steps {
			for _, w := range s.waits {
				longest = max(longest, w)
			}
		}
		scale = int64(min(100, 15000/longest))
		var n int64
		var unit string
		if _, err := fmt.Sscanf(strings.Replace(c.rate, "r/", " ", 1), "%d %s", &n, &unit); err != nil {
			t.Fatalf("rate %q: %v", c.rate, err)
		}
		rate = fmt.Sprintf("%dr/d", n*map[string]int64{"s": 86400, "m": 1440}[unit]/scale)
	}
	clk := fakeclock.New(time.Now())
	in, up := e2eStart(t, st, e2eAccessLog+fmt.Sprintf(`
upstreams: { app: { url: %%q } }
policies:
  z: { algorithm: leaky_bucket, rate: %s, %s, key: ip }
routes: [ { name: lim, upstream: app, policies: [z] } ]
`, rate, c.policy), rlproxytest.WithNow(clk.Now))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 20 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	decided := func() (n float64) {
		_, samples := opsScrape(t, in)
		for _, s := range samples {
			if s.name == "rlproxy_requests_total" && s.labels["route"] == "lim" {
				n += s.value
			}
		}
		return n
	}
	res := make([][]coreNginxResult, len(c.steps))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var at time.Duration
	sent, accepted := 0, 0
	for i, s := range c.steps {
		clk.Advance(time.Duration(scale) * (s.at - at))
		at = s.at
		for range s.n {
			wg.Go(func() {
				r := coreNginxDo(client, fmt.Sprintf("%s/lim?s=%d", in.URL, i))
				mu.Lock()
				res[i] = append(res[i], r)
				mu.Unlock()
			})
		}
		sent += s.n
		// Every request of the step decided before the clock moves on.
		waitfor.True(t, fmt.Sprintf("step %d decided", i), func() bool { return decided() == float64(sent) })
		accepted += s.want
	}
	wg.Wait()
	for i, s := range c.steps {
		if got, want := coreNginxStatuses(coreNginxSorted(res[i])), coreNginxStatuses(coreNginxPlanned(s.n, s.want)); got != want {
			t.Errorf("step %d (at %v): answered %s, want %s (nginx's arithmetic)", i, s.at, got, want)
		}
		if !c.timed {
			continue
		}
		want := make([]int64, len(s.waits))
		for j, w := range s.waits {
			want[j] = int64(w) * scale
		}
		if got := e2eWaits(t, in, fmt.Sprintf("/lim?s=%d", i), sent); !slices.Equal(got, want) {
			t.Errorf("step %d (at %v): decided waits %v ms, want %v", i, s.at, got, want)
		}
	}
	if n := up.Count(); n != accepted {
		t.Errorf("upstream saw %d requests, want %d (the accepted ones)", n, accepted)
	}
}

// coreNginxPlanned is n answers of which ok are 200s, the rest 429s.
func coreNginxPlanned(n, ok int) []coreNginxResult {
	rs := make([]coreNginxResult, n)
	for i := range rs {
		rs[i].status = 429
		if i < ok {
			rs[i].status = 200
		}
	}
	return rs
}

// coreNginxSorted sorts a step's answers by status (200s first), in place.
func coreNginxSorted(rs []coreNginxResult) []coreNginxResult {
	slices.SortFunc(rs, func(a, b coreNginxResult) int { return a.status - b.status })
	return rs
}

// coreNginxDo sends one GET and returns its status (-1 on a transport
// error).
func coreNginxDo(c *http.Client, url string) coreNginxResult {
	resp, err := c.Get(url)
	if err != nil {
		return coreNginxResult{status: -1}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return coreNginxResult{status: resp.StatusCode}
}

// coreNginxStatuses is a step's status counts, e.g. "21×200 29×429".
func coreNginxStatuses(rs []coreNginxResult) string {
	var parts []string
	for i := 0; i < len(rs); {
		j := i
		for j < len(rs) && rs[j].status == rs[i].status {
			j++
		}
		parts = append(parts, fmt.Sprintf("%d×%d", j-i, rs[i].status))
		i = j
	}
	return strings.Join(parts, " ")
}
