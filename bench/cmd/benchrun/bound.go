package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// minProxyBusyPct is how busy a proxy's pinned CPUs must be with its
// work for its full-load row to measure the proxy: below it something else
// (wrk, the upstream, other processes) set the pace, and its req/s is a
// lower bound, not the proxy's capacity.
const minProxyBusyPct = 90

// boundCheck says whether a row's full-load figures measure the proxy.
//
// Its own share is req/s × proxy CPU-µs per request over its pinned CPUs:
// the process's time. It misses the kernel's interrupt work on those CPUs
// that runs outside the process's time (with a kernel that accounts irq
// and softirq time apart, on loopback mostly delivering what the proxy
// sent): nginx + limit_req at 45k req/s here had 80-86 % of its own and
// 23-27 % softirq on its CPU, 0 idle, so on its own share alone no nginx
// row could reach 90 %. So the check adds the interrupt work its CPU did,
// as far as it is not already in the process's time: busy = own +
// min(interrupt share, share of the CPU not the process's). What is left,
// idle time and other processes', the proxy did not use.
type boundCheck struct {
	// OwnPct is the proxy's own share (req/s × CPU-µs per request) in %:
	// the median over rounds, then each round.
	OwnPct      float64   `json:"own_pct"`
	OwnPerRound []float64 `json:"own_pct_per_round"`
	// BusyPct adds the interrupt work on its CPUs (as OwnPct where the run
	// has no per-CPU figures): the median over rounds, then each round.
	BusyPct  float64   `json:"busy_pct"`
	PerRound []float64 `json:"busy_pct_per_round"`
	// LoadBound is set when BusyPct < minProxyBusyPct: the row's ratios are
	// not marks. Why says what took the difference.
	LoadBound bool   `json:"load_bound"`
	Why       string `json:"why,omitempty"`
}

// ownPct is the share of nCPU CPUs that the proxy's process time filled
// during run s, in %: req/s × CPU-µs per request. ok is false without a
// proxy CPU figure (the upstream direct).
func ownPct(s sample, nCPU int) (float64, bool) {
	if s.ProxyCPUus == nil {
		return 0, false
	}
	return s.RPS * *s.ProxyCPUus / 1e6 * 100 / float64(max(nCPU, 1)), true
}

// busyPct is ownPct plus the interrupt work on the proxy's CPUs that is
// not in its process time: at most what was not the process's. The sum
// is capped at 100 % (or own, when the clock ticks put that above).
func busyPct(s sample, nCPU int) (float64, bool) {
	own, ok := ownPct(s, nCPU)
	if !ok || s.ProxyCPUIRQPct == nil || s.ProxyCPUOtherPct == nil {
		return own, ok
	}
	return min(own+min(*s.ProxyCPUIRQPct, *s.ProxyCPUOtherPct), max(own, 100)), true
}

// checkBound sets Bound on every row that has a proxy, from its full-load
// runs; nProxy and nLoad are the numbers of CPUs the proxies and the load
// side were pinned to.
func checkBound(results []*targetResult, nProxy, nLoad int) {
	for _, r := range results {
		r.Bound = boundOf(r.Full, r.FullMedian, nProxy, nLoad)
	}
}

// boundOf is the check of one row's runs (nil without a proxy figure).
// A load-bound row's reason gives what its CPU did instead (sat idle, ran
// other processes) and how close the load side was to its ceiling: on a
// shared machine other processes fill the time a waiting proxy leaves, so
// the idle share alone does not tell a slow load side from a busy machine.
func boundOf(runs []sample, m *sample, nProxy, nLoad int) *boundCheck {
	c := &boundCheck{}
	for _, s := range runs {
		own, ok := ownPct(s, nProxy)
		if !ok {
			continue
		}
		busy, _ := busyPct(s, nProxy)
		c.OwnPerRound, c.PerRound = append(c.OwnPerRound, own), append(c.PerRound, busy)
	}
	if len(c.PerRound) == 0 {
		return nil
	}
	c.OwnPct, c.BusyPct = median(slices.Clone(c.OwnPerRound)), median(slices.Clone(c.PerRound))
	if c.BusyPct >= minProxyBusyPct {
		return c
	}
	c.LoadBound = true
	c.Why = fmt.Sprintf("the proxy kept its CPU %.1f %% busy (under %d %%)", c.BusyPct, minProxyBusyPct)
	if m == nil || m.ProxyCPUIdlePct == nil || m.ProxyCPUOtherPct == nil {
		return c
	}
	other := *m.ProxyCPUOtherPct
	if m.ProxyCPUIRQPct != nil {
		other = max(0, other-*m.ProxyCPUIRQPct)
	}
	c.Why += fmt.Sprintf("; its CPU sat idle %.0f %%, other processes took %.0f %%", *m.ProxyCPUIdlePct, other)
	if m.LoadCPUBusyPct != nil {
		c.Why += fmt.Sprintf("; the load CPUs were %.0f %% busy", *m.LoadCPUBusyPct)
	}
	if v, ok := loadCeiling(m, nLoad); ok && m.RPS > 0 {
		c.Why += fmt.Sprintf(", their ceiling with wrk and the upstream alone %.0f req/s (%.2f× its rate)", v, v/m.RPS)
	}
	return c
}

// loadCeiling is the request rate the load CPUs could sustain with wrk
// and the upstream alone, from their CPU-µs per request in m, in req/s
// (nCPU load CPUs); ok is false without both figures.
func loadCeiling(m *sample, nCPU int) (float64, bool) {
	if m == nil || m.WrkCPUus == nil || m.UpstreamCPUus == nil || *m.WrkCPUus+*m.UpstreamCPUus <= 0 {
		return 0, false
	}
	return float64(max(nCPU, 1)) * 1e6 / (*m.WrkCPUus + *m.UpstreamCPUus), true
}

// cpuTimes are one CPU's busy, interrupt (irq + softirq) and total clock
// ticks since boot.
type cpuTimes struct{ busy, irq, total int64 }

// perCPUTicks reads /proc/stat's per-CPU lines.
func perCPUTicks() (map[int]cpuTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil, fmt.Errorf("reading /proc/stat: %w", err)
	}
	return parsePerCPU(string(b))
}

// parsePerCPU reads the "cpuN" lines of /proc/stat (proc(5)): busy is
// user, nice, system, irq, softirq and steal; total adds idle and iowait.
func parsePerCPU(stat string) (map[int]cpuTimes, error) {
	out := map[int]cpuTimes{}
	for _, line := range strings.Split(stat, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		n, err := strconv.Atoi(f[0][3:])
		if err != nil {
			return nil, fmt.Errorf("parsing /proc/stat: %q", f[0])
		}
		var t cpuTimes
		for i := 1; i <= 8; i++ {
			v, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("parsing /proc/stat: %w", err)
			}
			t.total += v
			if i != 4 && i != 5 { // idle, iowait
				t.busy += v
			}
			if i == 6 || i == 7 {
				t.irq += v
			}
		}
		out[n] = t
	}
	if len(out) == 0 {
		return nil, errors.New("parsing /proc/stat: no per-CPU lines")
	}
	return out, nil
}

// sumCPUs adds the times of the listed CPUs in snap.
func sumCPUs(snap map[int]cpuTimes, cpus []int) cpuTimes {
	var t cpuTimes
	for _, c := range cpus {
		t.busy += snap[c].busy
		t.irq += snap[c].irq
		t.total += snap[c].total
	}
	return t
}

// cpuList expands a taskset CPU list such as "0", "0,1" or "0-3,6";
// malformed parts are skipped.
func cpuList(list string) []int {
	var out []int
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, errA := strconv.Atoi(strings.TrimSpace(lo))
		b, errB := a, error(nil)
		if isRange {
			b, errB = strconv.Atoi(strings.TrimSpace(hi))
		}
		if errA != nil || errB != nil {
			continue
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out
}

// boundMarkdown renders latest.md's check that each proxy row measured
// the proxy, not the load side; nProxy and nLoad are the pinned CPU counts.
func boundMarkdown(b *strings.Builder, results []*targetResult, nProxy, nLoad int) {
	fmt.Fprintf(b, "\n## Was each proxy the bottleneck? (full load)\n\n")
	fmt.Fprintf(b, "own %% = req/s × proxy CPU-µs per request, in %% of the proxy's pinned CPU%s (its process time). busy %% adds the kernel's interrupt work on that CPU (irq + softirq: on loopback mostly delivering what the proxy sent), as far as the process's time leaves room for it. ", plural(nProxy))
	fmt.Fprintf(b, "Under %d %% busy the row is **load-bound**: something else set the pace, its req/s is a lower bound and its ratios are not marks. ", minProxyBusyPct)
	fmt.Fprintf(b, "The load side's ceiling is what the load CPU%s could serve with wrk and the upstream alone: %d × 10⁶ ÷ (wrk + upstream CPU-µs per request).\n\n", plural(nLoad), nLoad)
	fmt.Fprintf(b, "| target | busy %% (median) | per round | own %% (median) | per round | its CPU: interrupts %% | idle %% | load CPU busy %% | wrk CPU-µs/req | upstream CPU-µs/req | load side's ceiling req/s | |\n")
	fmt.Fprintf(b, "|---|--:|---|--:|---|--:|--:|--:|--:|--:|--:|---|\n")
	rounds := func(v []float64) string {
		out := make([]string, len(v))
		for i, x := range v {
			out[i] = fmt.Sprintf("%.0f", x)
		}
		return strings.Join(out, " ")
	}
	for _, r := range results {
		if r.Bound == nil {
			continue
		}
		m, c := r.FullMedian, r.Bound
		ceiling := "–"
		if v, ok := loadCeiling(m, nLoad); ok {
			ceiling = fmt.Sprintf("%.0f", v)
		}
		verdict := "proxy-bound"
		if c.LoadBound {
			verdict = "**load-bound**: " + c.Why
		}
		fmt.Fprintf(b, "| %s | %.0f | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Name, c.BusyPct, rounds(c.PerRound),
			c.OwnPct, rounds(c.OwnPerRound), num(m.ProxyCPUIRQPct, 0), num(m.ProxyCPUIdlePct, 0), num(m.LoadCPUBusyPct, 0),
			num(m.WrkCPUus, 1), num(m.UpstreamCPUus, 1), ceiling, verdict)
	}
}

// plural is "s" for n != 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
