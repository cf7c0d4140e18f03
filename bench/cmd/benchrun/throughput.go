package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// baselineID is the target every ratio is taken against: nginx proxy_pass
// with limit_req, the incumbent rlproxy must hold its own against.
const baselineID = "nginx_limit_req"

// directID is the upstream without a proxy, the zero of "added latency".
const directID = "direct"

// throughputPlan is what one throughput run does.
type throughputPlan struct {
	reps     int      // R: rounds over all targets; medians are reported
	fullArgs []string // wrk options without duration, e.g. -t1 -c32
	fullDur  time.Duration
	halfArgs []string // the half-load pass, e.g. -t1 -c8
	halfDur  time.Duration
	// halfDelayMs paces the half-load pass: each connection waits this
	// long after every response (0 = closed loop, as fast as it answers).
	halfDelayMs int
	warmup      time.Duration // unrecorded wrk run before each full-load run; 0 skips
	// maxBgPct: a run during which other processes used more than this % of
	// all CPUs is repeated, up to disturbedRetries times (0 = never).
	maxBgPct float64
}

// disturbedRetries bounds how often one disturbed run is repeated.
const disturbedRetries = 2

// targetSpec declares one row: how to start it, and how wrk loads it.
type targetSpec struct {
	id, name, kind, conf string
	valkey               bool
	// keys > 0 makes wrk send each request with the next of keys X-API-Key
	// values in turn (report.lua, BENCH_KEYS): that many clients instead of
	// one, for policies keyed by that header.
	keys int
	// admin: the config has admin_listen defaultAdmin (rendered to a free
	// port); pollPage: its admin page is polled during every measured run.
	// optIn rows run only when named in -targets (the admin page A/B).
	admin, pollPage, optIn bool
}

// baseSuffix ends the id of a target's A/B twin ("rlproxy_memory@base"),
// which runs the rlproxy built from BENCH_BASE (-rlproxy-base).
const baseSuffix = "@base"

// withBaseTwins returns specs with, after each rlproxy row, its twin on the
// base binary, so every round measures both builds back to back
// (interleaved A/B); specs is returned as it is when there is no base.
func withBaseTwins(specs []targetSpec, haveBase bool) []targetSpec {
	if !haveBase {
		return specs
	}
	out := make([]targetSpec, 0, 2*len(specs))
	for _, s := range specs {
		out = append(out, s)
		if s.kind == "rlproxy" {
			twin := s
			twin.id, twin.name = s.id+baseSuffix, s.name+" (base)"
			out = append(out, twin)
		}
	}
	return out
}

// benchKeys is how many clients the "distinct clients" rows simulate:
// enough that the requests in flight together (wrk -c32) never share one.
const benchKeys = 10000

// throughputTargets lists the rows in report order.
func throughputTargets() []targetSpec {
	return []targetSpec{
		{id: directID, name: "direct (upstream, no proxy)", kind: "direct"},
		{id: "nginx", name: "nginx proxy_pass", kind: "nginx", conf: "nginx-proxy.conf"},
		{id: baselineID, name: "nginx proxy_pass + limit_req", kind: "nginx", conf: "nginx-limitreq.conf"},
		{id: "caddy", name: "Caddy reverse_proxy", kind: "caddy", conf: "Caddyfile"},
		{id: "minproxy", name: "minproxy (Go floor)", kind: "minproxy"},
		{id: "ceiling", name: "ceiling (fasthttp + token bucket)", kind: "ceiling"},
		{id: "rlproxy", name: "rlproxy, no policy", kind: "rlproxy", conf: "rlproxy-nopolicy.yaml"},
		{id: "rlproxy_accesslog", name: "rlproxy, no policy, access log on", kind: "rlproxy", conf: "rlproxy-accesslog.yaml"},
		{id: "rlproxy_pool1", name: "rlproxy, no policy, one-server pool (urls)", kind: "rlproxy", conf: "rlproxy-pool1.yaml"},
		{id: "rlproxy_memory", name: "rlproxy, token bucket, memory", kind: "rlproxy", conf: "rlproxy-memory.yaml"},
		{id: "rlproxy_memory_std", name: "rlproxy, token bucket, memory, engine std", kind: "rlproxy", conf: "rlproxy-memory-std.yaml"},
		{id: "rlproxy_valkey", name: "rlproxy, token bucket, Valkey", kind: "rlproxy", conf: "rlproxy-valkey.yaml", valkey: true},
		{id: "rlproxy_valkey_allot", name: "rlproxy, token bucket, Valkey, allotments", kind: "rlproxy", conf: "rlproxy-valkey-allot.yaml", valkey: true},
		{id: "rlproxy_memory_keys", name: "rlproxy, memory, 10k clients", kind: "rlproxy", conf: "rlproxy-memory-keys.yaml", keys: benchKeys},
		{id: "rlproxy_valkey_keys", name: "rlproxy, Valkey, 10k clients", kind: "rlproxy", conf: "rlproxy-valkey-keys.yaml", valkey: true, keys: benchKeys},
		{id: "rlproxy_memory_admin", name: "rlproxy, memory, admin page closed", kind: "rlproxy", conf: "rlproxy-memory-admin.yaml", admin: true, optIn: true},
		{id: "rlproxy_memory_page", name: "rlproxy, memory, admin page polled", kind: "rlproxy", conf: "rlproxy-memory-admin.yaml", admin: true, pollPage: true, optIn: true},
	}
}

// sample is one wrk run against one target. CPU figures are µs of
// utime+stime per completed request; nil where the process does not exist.
type sample struct {
	RPS          float64 `json:"rps"`
	Requests     int64   `json:"requests"`
	P50us        float64 `json:"p50_us"`
	P90us        float64 `json:"p90_us"`
	P99us        float64 `json:"p99_us"`
	Non2xx       int64   `json:"non_2xx_3xx"`
	SocketErrors int64   `json:"socket_errors"`

	ProxyCPUus    *float64 `json:"proxy_cpu_us_per_req"`
	StoreCPUus    *float64 `json:"store_cpu_us_per_req,omitempty"`
	UpstreamCPUus *float64 `json:"upstream_cpu_us_per_req"`
	// WrkCPUus is wrk's own CPU per request (its rusage).
	WrkCPUus *float64 `json:"wrk_cpu_us_per_req,omitempty"`
	// ProxyCPUIdlePct and ProxyCPUOtherPct are the shares of the proxy's
	// pinned CPUs that sat idle, and that went to anything but the proxy's
	// process time (other processes, the kernel's interrupt work), during
	// the run, in %; ProxyCPUIRQPct is the interrupt work's share (irq and
	// softirq in /proc/stat: on loopback, mostly the network stack
	// delivering what the proxy sent). LoadCPUBusyPct is how busy the load
	// CPUs were (wrk, upstream, Valkey and anyone else), in %. They say
	// what set the pace when the proxy did not fill its CPUs (boundCheck).
	ProxyCPUIdlePct  *float64 `json:"proxy_cpus_idle_pct,omitempty"`
	ProxyCPUOtherPct *float64 `json:"proxy_cpus_other_pct,omitempty"`
	ProxyCPUIRQPct   *float64 `json:"proxy_cpus_irq_pct,omitempty"`
	LoadCPUBusyPct   *float64 `json:"load_cpus_busy_pct,omitempty"`
	// BackgroundCPUPct is the CPU time other processes (not the target,
	// its store, the upstream or wrk) used during the run, in percent of all
	// CPUs: on a shared machine, a run with more than a few percent is suspect.
	BackgroundCPUPct float64 `json:"background_cpu_pct"`
	// AddedP99us is P99us minus direct's P99us in the same round (half-load pass).
	AddedP99us *float64 `json:"added_p99_us,omitempty"`
	// PagePolls and PagePollErrors count the admin page requests answered
	// 200 and not, during the run (rows that poll the page only).
	PagePolls      int `json:"page_polls,omitempty"`
	PagePollErrors int `json:"page_poll_errors,omitempty"`
}

// targetResult is one row of the report.
type targetResult struct {
	ID     string   `json:"id"`
	Name   string   `json:"name"`
	Status string   `json:"status"`
	Full   []sample `json:"full_runs,omitempty"`
	Half   []sample `json:"half_runs,omitempty"`
	// FullMedian and HalfMedian are per-field medians over the runs.
	FullMedian *sample `json:"full_median,omitempty"`
	HalfMedian *sample `json:"half_median,omitempty"`
	// VsBaseline divides this row's medians by nginx+limit_req's.
	VsBaseline *ratios `json:"vs_nginx_limit_req,omitempty"`
	// Bound says whether the full-load runs kept the proxy's CPUs busy
	// (nil without a proxy: the upstream direct).
	Bound *boundCheck `json:"cpu_check,omitempty"`
}

// ratios are this target's figure divided by the baseline's (1.0 = equal).
type ratios struct {
	RPS          *float64 `json:"rps,omitempty"`
	P50          *float64 `json:"p50,omitempty"`
	P99          *float64 `json:"p99,omitempty"`
	ProxyCPU     *float64 `json:"proxy_cpu_per_req,omitempty"`
	HalfP99      *float64 `json:"half_p99,omitempty"`
	HalfAddedP99 *float64 `json:"half_added_p99,omitempty"`
}

// cpuSnap is the CPU ticks of a target's processes, of the whole machine
// and of each CPU at one instant.
type cpuSnap struct {
	proxy, store, upstream, system int64
	perCPU                         map[int]cpuTimes
}

// bench runs measurements against started targets.
type bench struct {
	wrk      wrkRunner
	upstream *proc
	hz       int64 // clock ticks per second
	ncpu     int   // CPUs of the machine (not of this pinned process)
	quiet    quietGate
	// proxyCPUs and loadCPUs are the pinned CPU sets (lab.proxyCPUs,
	// lab.loadCPUs expanded).
	proxyCPUs, loadCPUs []int
}

func (b *bench) snap(t *target) (cpuSnap, error) {
	var s cpuSnap
	var err error
	if t.proxy != nil {
		if s.proxy, err = treeTicks(t.proxy.pid()); err != nil {
			return s, fmt.Errorf("reading proxy CPU: %w", err)
		}
	}
	if t.store != nil {
		if s.store, err = treeTicks(t.store.pid()); err != nil {
			return s, fmt.Errorf("reading store CPU: %w", err)
		}
	}
	if b.upstream != nil {
		if s.upstream, err = treeTicks(b.upstream.pid()); err != nil {
			return s, fmt.Errorf("reading upstream CPU: %w", err)
		}
	}
	if s.perCPU, err = perCPUTicks(); err != nil {
		return s, err
	}
	s.system, err = busyTicks()
	return s, err
}

// measure runs wrk once against t and attributes the CPU spent meanwhile.
func (b *bench) measure(ctx context.Context, t *target, args []string, d time.Duration, delayMs int) (sample, error) {
	if err := b.quiet.wait(ctx); err != nil {
		return sample{}, err
	}
	before, err := b.snap(t)
	if err != nil {
		return sample{}, err
	}
	wall := time.Now()
	var rep wrkReport
	polls, pollErrs, err := withPagePoll(ctx, t, func() (err error) {
		rep, err = b.wrk.run(ctx, args, d, delayMs, t.Keys, t.URL)
		return err
	})
	if err != nil {
		return sample{}, err
	}
	after, err := b.snap(t)
	elapsed := time.Since(wall)
	if err != nil {
		return sample{}, err
	}
	s := sample{
		RPS: rep.rps(), Requests: rep.Requests,
		P50us: rep.P50us, P90us: rep.P90us, P99us: rep.P99us,
		Non2xx: rep.ErrStatus, SocketErrors: rep.socketErrors(),
		PagePolls: polls, PagePollErrors: pollErrs,
	}
	perReq := func(ticks int64) *float64 {
		if rep.Requests == 0 {
			return nil
		}
		v := float64(ticks) * 1e6 / float64(b.hz) / float64(rep.Requests)
		return &v
	}
	if t.proxy != nil {
		s.ProxyCPUus = perReq(after.proxy - before.proxy)
	}
	if t.store != nil {
		s.StoreCPUus = perReq(after.store - before.store)
	}
	if b.upstream != nil {
		s.UpstreamCPUus = perReq(after.upstream - before.upstream)
	}
	if rep.Requests > 0 {
		s.WrkCPUus = ptr(rep.CPUus / float64(rep.Requests))
	}
	ours := after.proxy - before.proxy + after.store - before.store + after.upstream - before.upstream
	foreignUs := float64(after.system-before.system-ours)*1e6/float64(b.hz) - rep.CPUus
	s.BackgroundCPUPct = min(max(0, 100*foreignUs/(float64(elapsed.Microseconds())*float64(b.ncpu))), 100)
	b.cpuShares(&s, t, before, after)
	return s, nil
}

// cpuShares sets s's idle and other-process shares of the proxy's CPUs
// and the load CPUs' busy share between snapshots before and after.
func (b *bench) cpuShares(s *sample, t *target, before, after cpuSnap) {
	pct := func(part, whole int64) *float64 { return ptr(min(max(0, 100*float64(part)/float64(whole)), 100)) }
	if p0, p1 := sumCPUs(before.perCPU, b.proxyCPUs), sumCPUs(after.perCPU, b.proxyCPUs); t.proxy != nil && p1.total > p0.total {
		total, busy := p1.total-p0.total, p1.busy-p0.busy
		s.ProxyCPUIdlePct = pct(total-busy, total)
		s.ProxyCPUOtherPct = pct(busy-(after.proxy-before.proxy), total)
		s.ProxyCPUIRQPct = pct(p1.irq-p0.irq, total)
	}
	if l0, l1 := sumCPUs(before.perCPU, b.loadCPUs), sumCPUs(after.perCPU, b.loadCPUs); l1.total > l0.total {
		s.LoadCPUBusyPct = pct(l1.busy-l0.busy, l1.total-l0.total)
	}
}

// runThroughput measures every live target plan.reps times at full load and
// at half load, round-robin (the order rotates each round so no target
// always follows the same neighbour), and fills medians and ratios.
func (b *bench) runThroughput(ctx context.Context, plan throughputPlan, targets []*target, progress func(string)) []*targetResult {
	results := make([]*targetResult, len(targets))
	var live []int
	for i, t := range targets {
		results[i] = &targetResult{ID: t.ID, Name: t.Name, Status: t.Status}
		if t.Status == "ok" {
			live = append(live, i)
		}
	}
	pass := func(half bool) {
		args, d, delayMs, label := plan.fullArgs, plan.fullDur, 0, "full"
		if half {
			args, d, delayMs, label = plan.halfArgs, plan.halfDur, plan.halfDelayMs, "half"
		}
		for rep := range plan.reps {
			directP99 := -1.0
			for k := range live {
				i := live[(k+rep)%len(live)]
				t, r := targets[i], results[i]
				if r.Status != "ok" || ctx.Err() != nil {
					continue
				}
				if !half && plan.warmup > 0 {
					if _, err := b.wrk.run(ctx, args, plan.warmup, 0, t.Keys, t.URL); err != nil {
						r.Status = "failed: warm-up: " + err.Error()
						continue
					}
				}
				s, err := b.measure(ctx, t, args, d, delayMs)
				for try := 0; err == nil && plan.maxBgPct > 0 && s.BackgroundCPUPct > plan.maxBgPct && try < disturbedRetries; try++ {
					progress(fmt.Sprintf("  %s: other processes used %.0f%% of the CPUs meanwhile; repeating the run", t.Name, s.BackgroundCPUPct))
					s, err = b.measure(ctx, t, args, d, delayMs)
				}
				if err != nil {
					r.Status = "failed: " + err.Error()
					continue
				}
				polled := ""
				if t.PollPage {
					polled = fmt.Sprintf("  (admin page: %d polls, %d failed)", s.PagePolls, s.PagePollErrors)
				}
				progress(fmt.Sprintf("%s round %d/%d  %-32s %9.0f req/s  p50 %6.0f µs  p99 %6.0f µs%s",
					label, rep+1, plan.reps, t.Name, s.RPS, s.P50us, s.P99us, polled))
				if half {
					if t.ID == directID {
						directP99 = s.P99us
					}
					r.Half = append(r.Half, s)
				} else {
					r.Full = append(r.Full, s)
				}
			}
			if half && directP99 >= 0 {
				for _, i := range live {
					if h := results[i].Half; len(h) == rep+1 {
						v := h[rep].P99us - directP99
						h[rep].AddedP99us = &v
					}
				}
			}
		}
	}
	pass(false)
	pass(true)
	summarize(results)
	return results
}

// summarize sets every row's medians from its runs and its ratios to the
// baseline (none when the baseline has no runs).
func summarize(results []*targetResult) {
	for _, r := range results {
		r.FullMedian, r.HalfMedian, r.VsBaseline = medianSample(r.Full), medianSample(r.Half), nil
	}
	fillRatios(results)
}

// medianSample takes the median of each field separately; nil for no runs.
func medianSample(runs []sample) *sample {
	if len(runs) == 0 {
		return nil
	}
	f := func(get func(sample) float64) float64 {
		v := make([]float64, len(runs))
		for i, s := range runs {
			v[i] = get(s)
		}
		return median(v)
	}
	p := func(get func(sample) *float64) *float64 {
		var v []float64
		for _, s := range runs {
			if x := get(s); x != nil {
				v = append(v, *x)
			}
		}
		if len(v) == 0 {
			return nil
		}
		m := median(v)
		return &m
	}
	return &sample{
		RPS:           f(func(s sample) float64 { return s.RPS }),
		Requests:      int64(f(func(s sample) float64 { return float64(s.Requests) })),
		P50us:         f(func(s sample) float64 { return s.P50us }),
		P90us:         f(func(s sample) float64 { return s.P90us }),
		P99us:         f(func(s sample) float64 { return s.P99us }),
		Non2xx:        int64(f(func(s sample) float64 { return float64(s.Non2xx) })),
		SocketErrors:  int64(f(func(s sample) float64 { return float64(s.SocketErrors) })),
		ProxyCPUus:    p(func(s sample) *float64 { return s.ProxyCPUus }),
		StoreCPUus:    p(func(s sample) *float64 { return s.StoreCPUus }),
		UpstreamCPUus: p(func(s sample) *float64 { return s.UpstreamCPUus }),
		WrkCPUus:      p(func(s sample) *float64 { return s.WrkCPUus }),

		ProxyCPUIdlePct:  p(func(s sample) *float64 { return s.ProxyCPUIdlePct }),
		ProxyCPUOtherPct: p(func(s sample) *float64 { return s.ProxyCPUOtherPct }),
		ProxyCPUIRQPct:   p(func(s sample) *float64 { return s.ProxyCPUIRQPct }),
		LoadCPUBusyPct:   p(func(s sample) *float64 { return s.LoadCPUBusyPct }),
		AddedP99us:       p(func(s sample) *float64 { return s.AddedP99us }),

		BackgroundCPUPct: f(func(s sample) float64 { return s.BackgroundCPUPct }),
	}
}

// median of v (mean of the middle two for an even count); v is reordered.
func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// fillRatios sets VsBaseline on every measured row when the baseline ran.
func fillRatios(results []*targetResult) {
	var base *targetResult
	for _, r := range results {
		if r.ID == baselineID {
			base = r
		}
	}
	if base == nil || base.FullMedian == nil {
		return
	}
	div := func(a, b *float64) *float64 {
		if a == nil || b == nil || *b == 0 {
			return nil
		}
		v := *a / *b
		return &v
	}
	ptr := func(v float64) *float64 { return &v }
	for _, r := range results {
		if r.FullMedian == nil {
			continue
		}
		f, bf := r.FullMedian, base.FullMedian
		q := &ratios{
			RPS:      div(ptr(f.RPS), ptr(bf.RPS)),
			P50:      div(ptr(f.P50us), ptr(bf.P50us)),
			P99:      div(ptr(f.P99us), ptr(bf.P99us)),
			ProxyCPU: div(f.ProxyCPUus, bf.ProxyCPUus),
		}
		if h, bh := r.HalfMedian, base.HalfMedian; h != nil && bh != nil && r.ID != directID {
			q.HalfP99 = div(ptr(h.P99us), ptr(bh.P99us))
			q.HalfAddedP99 = div(h.AddedP99us, bh.AddedP99us)
		}
		r.VsBaseline = q
	}
}
