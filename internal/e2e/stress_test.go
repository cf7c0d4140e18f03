package e2e

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/testutil/fleet"
	"rlproxy/internal/testutil/redisserver"
)

// stressSettings are TestStressStall's dimensions: the short form by
// default (it runs in the normal suite so that the harness cannot rot),
// the full form from scripts/stress.sh through the environment.
type stressSettings struct {
	clients, perClient, runs int
	instances, conns         []int
	timeout                  string // ", timeout: X" from RLPROXY_STRESS_TIMEOUT; "" = the default
	// stall is the forced server stall (DEBUG SLEEP seconds): "0.06", or
	// RLPROXY_STRESS_STALL, which makes the run a measurement (a stall
	// near or past valkey.timeout fails decisions open by design: logged,
	// not judged).
	stall   string
	measure bool
}

// stressFromEnv reads RLPROXY_STRESS_{CLIENTS,RUNS,INSTANCES,CONNS}
// (instances and conns: comma-separated lists) and RLPROXY_STRESS_TIMEOUT
// (a valkey.timeout instead of the default, for measuring).
func stressFromEnv(t *testing.T) stressSettings {
	s := stressSettings{clients: 1000, perClient: 12, runs: 1, instances: []int{1, 3}, conns: []int{200}, stall: "0.06"}
	num := func(name string, v *int) {
		if e := os.Getenv(name); e != "" {
			n, err := strconv.Atoi(e)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a whole number >= 1", name, e)
			}
			*v = n
		}
	}
	list := func(name string, v *[]int) {
		if e := os.Getenv(name); e != "" {
			*v = nil
			for f := range strings.SplitSeq(e, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil || n < 1 {
					t.Fatalf("%s=%q: want whole numbers >= 1, comma-separated", name, e)
				}
				*v = append(*v, n)
			}
		}
	}
	num("RLPROXY_STRESS_CLIENTS", &s.clients)
	num("RLPROXY_STRESS_RUNS", &s.runs)
	list("RLPROXY_STRESS_INSTANCES", &s.instances)
	list("RLPROXY_STRESS_CONNS", &s.conns)
	if e := os.Getenv("RLPROXY_STRESS_TIMEOUT"); e != "" { // to measure what default to choose
		if _, err := time.ParseDuration(e); err != nil {
			t.Fatalf("RLPROXY_STRESS_TIMEOUT=%q: %v", e, err)
		}
		s.timeout = ", timeout: " + e
	}
	if e := os.Getenv("RLPROXY_STRESS_STALL"); e != "" { // seconds, to measure headroom
		if v, err := strconv.ParseFloat(e, 64); err != nil || v <= 0 {
			t.Fatalf("RLPROXY_STRESS_STALL=%q: want seconds > 0", e)
		}
		s.stall, s.measure = e, true
	}
	return s
}

// TestStressStall: clients × 12 requests against a quota of 10
// per hour, through 1 and 3 rlproxy instances on one redis-server, with a
// forced 60 ms server stall (DEBUG SLEEP 0.06) in each run, at the default
// valkey.timeout and breaker: no client may get more than its 10, and no
// decision may be made without the store (fail open). It logs the p99.9
// and p99 request latency seen by the clients (loopback, proxy and
// decision included) and each instance's store error count.
func TestStressStall(t *testing.T) {
	s := stressFromEnv(t)
	srv := redisserver.Start(t, "--enable-debug-command", "yes")
	srv.Client(t)
	up := newOKUpstream(t)
	for _, n := range s.instances {
		f := fleet.Start(t, n, fmt.Sprintf(`
store: { type: valkey, valkey: { addrs: [%q]%s } }
upstreams: { app: { url: %q } }
policies:
  hourly: { algorithm: token_bucket, rate: 10r/h, burst: 10, key: "header:X-Client", on_store_error: allow }
routes:
  - { name: all, match: { path_prefix: / }, upstream: app, policies: [hourly] }
`, srv.Addr, s.timeout, up))
		for _, conns := range s.conns {
			for run := range s.runs {
				name := fmt.Sprintf("%d instance(s), %d connections, run %d", n, conns, run+1)
				r := stressRun(t, srv, f, s, conns, fmt.Sprintf("i%dc%dr%d-", n, conns, run))
				t.Logf("%s: %d requests in %v, over-admitted clients %d, under-admitted %d, transport errors %d, fail-open decisions %.0f, store errors %.0f; request latency p50 %v p99 %v p99.9 %v max %v; decision p99.9 %s",
					name, r.requests, r.elapsed.Round(time.Millisecond), r.over, r.under, r.errors, r.fallback, r.storeErrors, r.p(0.5), r.p(0.99), r.p(0.999), r.p(1), r.decisionP999)
				if !s.measure && (r.over != 0 || r.fallback != 0 || r.errors != 0) {
					t.Errorf("%s: %d clients over their quota, %.0f decisions without the store, %d transport errors; want 0", name, r.over, r.fallback, r.errors)
				}
			}
		}
		for i := range f.Procs {
			f.Kill(i)
		}
	}
}

// stressResult is one run's outcome; fallback and storeErrors are the
// growth of the instances' counters over the run.
type stressResult struct {
	requests, over, under, errors int
	fallback, storeErrors         float64
	elapsed                       time.Duration
	lat                           []time.Duration // sorted
	decisionP999                  string          // from the instances' histogram
}

// p is the q-quantile of the request latencies (1 = max).
func (r stressResult) p(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[min(int(q*float64(len(r.lat))), len(r.lat)-1)].Round(10 * time.Microsecond)
}

// stressRun sends s.perClient requests for each of s.clients clients
// (ids prefixed by prefix, a fresh quota each run), shuffled and spread
// round-robin over f's instances by conns keep-alive connections; when
// 40 % are sent, the server sleeps s.stall seconds (60 ms by default).
func stressRun(t *testing.T, srv *redisserver.Server, f *fleet.Fleet, s stressSettings, conns int, prefix string) stressResult {
	jobs := make([]int, 0, s.clients*s.perClient)
	for c := range s.clients {
		for range s.perClient {
			jobs = append(jobs, c)
		}
	}
	rand.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
	before := scrapeStore(t, f)
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	ok := make([]atomic.Int32, s.clients)
	var next, errs atomic.Int64
	lats := make([][]time.Duration, conns)
	stallAt := int64(len(jobs) * 4 / 10)
	var stalled sync.WaitGroup
	begin := time.Now()
	var wg sync.WaitGroup
	for w := range conns {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(len(jobs)) {
					return
				}
				if i == stallAt {
					stalled.Go(func() { srv.Do(t, "DEBUG", "SLEEP", s.stall) })
				}
				c := jobs[i]
				req, _ := http.NewRequest(http.MethodGet, f.URL(int(i)%len(f.Procs))+"/x", nil)
				req.Header.Set("X-Client", prefix+strconv.Itoa(c))
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					errs.Add(1)
					continue
				}
				_, _ = bufio.NewReader(resp.Body).Discard(1 << 20)
				resp.Body.Close()
				lats[w] = append(lats[w], time.Since(start))
				if resp.StatusCode == http.StatusOK {
					ok[c].Add(1)
				}
			}
		})
	}
	wg.Wait()
	stalled.Wait()
	r := stressResult{requests: len(jobs), errors: int(errs.Load()), elapsed: time.Since(begin), lat: slices.Concat(lats...)}
	slices.Sort(r.lat)
	for c := range ok {
		switch n := int(ok[c].Load()); {
		case n > 10:
			r.over++
		case n < min(10, s.perClient):
			r.under++
		}
	}
	after := scrapeStore(t, f)
	r.fallback, r.storeErrors = after.open-before.open, after.errors-before.errors
	r.decisionP999 = after.decisionQuantile(before, 0.999)
	return r
}

// storeScrape is the sum over a fleet's instances of
// rlproxy_store_fallback_decisions_total{mode="open"} (fail-open
// decisions), rlproxy_store_errors_total and the cumulative buckets of
// rlproxy_decision_duration_seconds (le in seconds → count).
type storeScrape struct {
	open, errors float64
	decision     map[float64]float64
}

// decisionQuantile is the upper bound of the first decision-time bucket
// that holds the q-quantile of the decisions between before and s.
func (s storeScrape) decisionQuantile(before storeScrape, q float64) string {
	les := make([]float64, 0, len(s.decision))
	for le := range s.decision {
		les = append(les, le)
	}
	slices.Sort(les)
	total := s.decision[les[len(les)-1]] - before.decision[les[len(les)-1]]
	for _, le := range les {
		if s.decision[le]-before.decision[le] >= q*total {
			return fmt.Sprintf("<= %v", time.Duration(le*float64(time.Second)))
		}
	}
	return "?"
}

func scrapeStore(t *testing.T, f *fleet.Fleet) storeScrape {
	sum := storeScrape{decision: map[float64]float64{}}
	for i := range f.Procs {
		resp, err := http.Get(f.AdminURL(i) + "/metrics")
		if err != nil {
			t.Fatalf("scraping instance %d: %v", i, err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			val := func() float64 {
				v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				if err != nil {
					t.Fatalf("instance %d: %q: %v", i, line, err)
				}
				return v
			}
			switch {
			case strings.HasPrefix(line, "rlproxy_store_fallback_decisions_total{") && strings.Contains(line, `mode="open"`):
				sum.open += val()
			case strings.HasPrefix(line, "rlproxy_store_errors_total "):
				sum.errors += val()
			case strings.HasPrefix(line, `rlproxy_decision_duration_seconds_bucket{le="`):
				le, err := strconv.ParseFloat(strings.TrimSuffix(strings.Split(line, `"`)[1], "+Inf"), 64)
				if err != nil { // +Inf
					le = 1e9
				}
				sum.decision[le] += val()
			}
		}
		resp.Body.Close()
	}
	return sum
}
