package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// meta describes the machine and setup a report was measured on.
type meta struct {
	Date      string            `json:"date"`
	Kernel    string            `json:"kernel"`
	CPU       string            `json:"cpu"`
	CPUs      int               `json:"cpus"`
	ProxyCPUs string            `json:"proxy_cpus"`
	LoadCPUs  string            `json:"load_cpus"`
	Versions  map[string]string `json:"versions"`
	Settings  map[string]string `json:"settings"`
}

func collectMeta(l *lab, settings map[string]string) meta {
	m := meta{
		Date:      time.Now().UTC().Format(time.RFC3339),
		Kernel:    firstLine("uname", "-sr"),
		CPUs:      machineCPUs(),
		ProxyCPUs: l.proxyCPUs,
		LoadCPUs:  l.loadCPUs,
		Settings:  settings,
		Versions: map[string]string{
			"go (harness)": runtime.Version(),
			"nginx":        firstLine("nginx", "-v"),
			"caddy":        firstLine("caddy", "version"),
			"wrk":          firstLine("wrk", "-v"),
			"redis-server": firstLine("redis-server", "--version"),
		},
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if _, err := os.Stat(l.rlproxyBin); err == nil {
		m.Versions["rlproxy"] = firstLine(l.rlproxyBin, "version")
	}
	return m
}

// writeReport writes name.md and name.json into dir and returns the Markdown.
func writeReport(dir, name, md string, v any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("making results dir: %w", err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding results: %w", err)
	}
	if err := writeFile(filepath.Join(dir, name+".json"), append(b, '\n')); err != nil {
		return fmt.Errorf("writing results: %w", err)
	}
	if err := writeFile(filepath.Join(dir, name+".md"), []byte(md)); err != nil {
		return fmt.Errorf("writing results: %w", err)
	}
	return nil
}

// writeFile replaces the file at path with b through a temporary file and
// a rename, so that a failed write (a full disk) leaves the old file whole:
// it may hold a 15-minute measurement (-redraw rewrites its input).
func writeFile(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// num formats a figure with the given decimals, "–" for nil.
func num(v *float64, decimals int) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%.*f", decimals, *v)
}

// ratio formats a ratio to the baseline as "1.23×", "–" for nil.
func ratio(v *float64) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f×", *v)
}

func ptr(v float64) *float64 { return &v }

// metaMarkdown renders the setup lines shared by both reports.
func metaMarkdown(b *strings.Builder, m meta) {
	fmt.Fprintf(b, "- date: %s; %s; %s; %d CPUs\n", m.Date, m.Kernel, m.CPU, m.CPUs)
	fmt.Fprintf(b, "- pinning (taskset): proxy under test on CPU %s; wrk / load generator, upstream and Valkey on CPU %s; Go processes get GOMAXPROCS = their CPU count\n", m.ProxyCPUs, m.LoadCPUs)
	var vs []string
	for _, k := range []string{"rlproxy", "nginx", "caddy", "wrk", "redis-server", "go (harness)"} {
		if v, ok := m.Versions[k]; ok && v != "" {
			vs = append(vs, k+": "+v)
		}
	}
	fmt.Fprintf(b, "- versions: %s\n", strings.Join(vs, "; "))
}

// throughputReport is latest.json.
type throughputReport struct {
	Meta    meta            `json:"meta"`
	Targets []*targetResult `json:"targets"`
	Goals   []goalResult    `json:"goals,omitempty"` // the pass marks (goals.go)
}

// throughputMarkdown renders latest.md.
func throughputMarkdown(rep throughputReport, plan throughputPlan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# rlproxy benchmark — proxy overhead\n\n")
	metaMarkdown(&b, rep.Meta)
	fmt.Fprintf(&b, "- full load: `wrk %s -d%s --latency`, %d interleaved rounds (round-robin, rotating start), median of each figure; %s warm-up before each run\n",
		strings.Join(plan.fullArgs, " "), plan.fullDur, plan.reps, plan.warmup)
	fmt.Fprintf(&b, "- half load: `wrk %s -d%s --latency`, each connection pausing %d ms after every response (wrk delay() hook; 0 = closed loop), same rounds\n",
		strings.Join(plan.halfArgs, " "), plan.halfDur, plan.halfDelayMs)
	fmt.Fprintf(&b, "- ×: ratio to nginx proxy_pass + limit_req (req/s: higher is better; latency and CPU: lower is better)\n")
	fmt.Fprintf(&b, "- bg CPU %%: CPU used during the run by processes outside the benchmark, in %% of all CPUs (median); above a few %% the figures are disturbed\n")
	if up := rep.Meta.Settings["upstream"]; up != "" {
		fmt.Fprintf(&b, "- upstream: %s, on the load CPU%s\n", up, plural(cpuCount(rep.Meta.LoadCPUs)))
	}
	if n := rep.Meta.Settings["nice"]; n != "" && n != "0" {
		fmt.Fprintf(&b, "- the servers and wrk ran at niceness %s (`BENCH_NICE`, through %s): other processes on the machine yielded to them\n", n, rep.Meta.Settings["nice_how"])
	}
	fmt.Fprintf(&b, "- a row whose proxy kept its CPU under %d %% busy is marked **load-bound** (see \"Was each proxy the bottleneck?\"): its req/s is a lower bound and its ratios are not marks\n\n", minProxyBusyPct)

	fmt.Fprintf(&b, "## Full load\n\n")
	fmt.Fprintf(&b, "| target | req/s | × | p50 µs | × | p99 µs | × | proxy CPU-µs/req | × | Valkey CPU-µs/req | non-2xx / socket errors | bg CPU %% |\n")
	fmt.Fprintf(&b, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rep.Targets {
		m := r.FullMedian
		if m == nil {
			fmt.Fprintf(&b, "| %s | %s | | | | | | | | | | |\n", r.Name, cell(r.Status))
			continue
		}
		q := r.VsBaseline
		if q == nil {
			q = &ratios{}
		}
		name := r.Name
		if r.Bound != nil && r.Bound.LoadBound {
			name += fmt.Sprintf(" (**load-bound**, %.1f %% busy)", r.Bound.BusyPct)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %.0f | %s | %.0f | %s | %s | %s | %s | %d / %d | %.1f |\n",
			name, m.RPS, ratio(q.RPS), m.P50us, ratio(q.P50), m.P99us, ratio(q.P99),
			num(m.ProxyCPUus, 1), ratio(q.ProxyCPU), num(m.StoreCPUus, 1), m.Non2xx, m.SocketErrors, m.BackgroundCPUPct)
	}

	boundMarkdown(&b, rep.Targets, cpuCount(rep.Meta.ProxyCPUs), cpuCount(rep.Meta.LoadCPUs))

	fmt.Fprintf(&b, "\n## Half load (paced, below saturation): latency added over direct\n\n")
	fmt.Fprintf(&b, "| target | req/s | p50 µs | p99 µs | p99 added vs direct µs | × nginx+limit_req added | bg CPU %% |\n")
	fmt.Fprintf(&b, "|---|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rep.Targets {
		h := r.HalfMedian
		if h == nil {
			fmt.Fprintf(&b, "| %s | %s | | | | | |\n", r.Name, cell(r.Status))
			continue
		}
		added := "–"
		if r.VsBaseline != nil {
			added = ratio(r.VsBaseline.HalfAddedP99)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.0f | %s | %s | %.1f |\n", r.Name, h.RPS, h.P50us, h.P99us, num(h.AddedP99us, 0), added, h.BackgroundCPUPct)
	}
	names := map[string]string{}
	for _, r := range rep.Targets {
		names[r.ID] = r.Name
	}
	goalsMarkdown(&b, rep.Goals, names)
	var notes []string
	for _, r := range rep.Targets {
		if r.Status != "ok" {
			notes = append(notes, fmt.Sprintf("- %s: %s", r.Name, r.Status))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(&b, "\nNot measured:\n%s\n", strings.Join(notes, "\n"))
	}
	return b.String()
}

// cell shortens a status for a table cell (the full text is under "Not
// measured" and in the JSON) and keeps '|' from splitting the cell.
func cell(s string) string {
	const maxLen = 60
	if r := []rune(s); len(r) > maxLen {
		s = string(r[:maxLen]) + "…"
	}
	return strings.ReplaceAll(s, "|", "/")
}
