package main

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fullRuns makes one full-load sample per (req/s, proxy CPU-µs) pair.
func fullRuns(pairs ...[2]float64) []sample {
	out := make([]sample, len(pairs))
	for i, p := range pairs {
		out[i] = sample{RPS: p[0], ProxyCPUus: ptr(p[1])}
	}
	return out
}

// close1 compares two figures computed in floating point.
func close1(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestBusyPct(t *testing.T) {
	// The figure: nginx + limit_req at 15,710 r/s and 42.1 µs.
	if got, ok := busyPct(sample{RPS: 15710, ProxyCPUus: ptr(42.1)}, 1); !ok || !close1(got, 66.1391) {
		t.Errorf("one CPU: got %v, %v; want 66.1391 %%", got, ok)
	}
	if got, _ := busyPct(sample{RPS: 20000, ProxyCPUus: ptr(90)}, 2); !close1(got, 90) {
		t.Errorf("two CPUs: got %v, want 90 %%", got)
	}
	if _, ok := busyPct(sample{RPS: 40000}, 1); ok {
		t.Error("no proxy (direct): want no figure")
	}
	// nginx as measured here: 80 % its own, the CPU's other 20 % all
	// interrupt work (25 % softirq, partly inside the process's time).
	s := sample{RPS: 40000, ProxyCPUus: ptr(20), ProxyCPUIRQPct: ptr(25), ProxyCPUOtherPct: ptr(20)}
	if own, _ := ownPct(s, 1); !close1(own, 80) {
		t.Errorf("own: got %v, want 80 %%", own)
	}
	if got, _ := busyPct(s, 1); !close1(got, 100) {
		t.Errorf("with its interrupts: got %v, want 100 %%", got)
	}
	// Clock ticks can put the sum over 100 %: capped, but never under own.
	s = sample{RPS: 40000, ProxyCPUus: ptr(24), ProxyCPUIRQPct: ptr(25), ProxyCPUOtherPct: ptr(5)}
	if got, _ := busyPct(s, 1); !close1(got, 100) {
		t.Errorf("over 100: got %v, want 100 %%", got)
	}
	s.ProxyCPUus = ptr(25.25)
	if got, _ := busyPct(s, 1); !close1(got, 101) {
		t.Errorf("own over 100: got %v, want 101 %%", got)
	}
	// Load-bound: 60 % its own, 15 % interrupts, 25 % other processes.
	s = sample{RPS: 30000, ProxyCPUus: ptr(20), ProxyCPUIRQPct: ptr(15), ProxyCPUOtherPct: ptr(40)}
	if got, _ := busyPct(s, 1); !close1(got, 75) {
		t.Errorf("other processes beside: got %v, want 75 %%", got)
	}
}

func TestBoundOf(t *testing.T) {
	// 94 %, 88 %, 96 %: the median (94) decides, every round is listed.
	runs := fullRuns([2]float64{20000, 47}, [2]float64{20000, 44}, [2]float64{20000, 48})
	c := boundOf(runs, medianSample(runs), 1, 1)
	if c == nil || c.LoadBound || !close1(c.BusyPct, 94) || len(c.PerRound) != 3 || !close1(c.PerRound[1], 88) {
		t.Fatalf("proxy-bound row: got %+v", c)
	}
	// Exactly 90 % is enough.
	if c := boundOf(fullRuns([2]float64{10000, 90}), nil, 1, 1); c.LoadBound {
		t.Errorf("90 %%: got load-bound, want proxy-bound")
	}

	// A slowed load side: the proxy's CPU sat idle more than others used it.
	slow := fullRuns([2]float64{15710, 42.1})
	slow[0].ProxyCPUIdlePct, slow[0].ProxyCPUOtherPct, slow[0].LoadCPUBusyPct = ptr(30), ptr(4), ptr(100)
	slow[0].WrkCPUus, slow[0].UpstreamCPUus = ptr(11), ptr(28)
	c = boundOf(slow, medianSample(slow), 1, 1)
	if want := "the proxy kept its CPU 66.1 % busy (under 90 %); its CPU sat idle 30 %, other processes took 4 %; " +
		"the load CPUs were 100 % busy, their ceiling with wrk and the upstream alone 25641 req/s (1.63× its rate)"; !c.LoadBound || c.Why != want {
		t.Errorf("slow load side: got %+v, want why %q", c, want)
	}
	// A busy machine: other work took the proxy's CPU.
	slow[0].ProxyCPUIdlePct, slow[0].ProxyCPUOtherPct = ptr(3), ptr(31)
	c = boundOf(slow, medianSample(slow), 1, 1)
	if !c.LoadBound || !strings.Contains(c.Why, "idle 3 %, other processes took 31 %;") {
		t.Errorf("shared CPU: got %+v", c)
	}
	// The interrupt work counts for the proxy, and is not "other processes".
	slow[0].ProxyCPUIRQPct, slow[0].ProxyCPUOtherPct = ptr(10), ptr(31)
	c = boundOf(slow, medianSample(slow), 1, 1)
	if !close1(c.BusyPct, 76.1391) || !close1(c.OwnPct, 66.1391) || !strings.Contains(c.Why, "other processes took 21 %;") {
		t.Errorf("shared CPU with interrupts: got %+v", c)
	}
	if boundOf(runs[:0], nil, 1, 1) != nil || boundOf([]sample{{RPS: 5}}, nil, 1, 1) != nil {
		t.Error("no proxy figure: want no check")
	}
}

// TestLoadBoundRowIsNoMark: a ratio with a load-bound row keeps its figure
// but gets no verdict; the half-load mark is not a full-load figure and
// keeps its verdict.
func TestLoadBoundRowIsNoMark(t *testing.T) {
	nginx := &targetResult{ID: baselineID, Name: "nginx + limit_req", Full: fullRuns([2]float64{15710, 42.1}),
		Half: runs([]float64{5000}, 400)}
	mem := &targetResult{ID: "rlproxy_memory", Name: "memory", Full: fullRuns([2]float64{9669, 96}),
		Half: runs([]float64{5000}, 600)}
	results := []*targetResult{nginx, mem}
	summarize(results)
	checkBound(results, 1, 1)
	if !nginx.Bound.LoadBound || mem.Bound.LoadBound {
		t.Fatalf("bound: nginx %+v, memory %+v; want nginx only", nginx.Bound, mem.Bound)
	}
	got := evalGoals(results, []goal{
		{num: "rlproxy_memory", den: baselineID, atLeast: 0.4},
		{num: "rlproxy_memory", den: baselineID, halfP99: true, atMost: 2},
	})
	full, half := got[0], got[1]
	if full.Met != nil || full.Note != "no mark: load-bound (nginx + limit_req 66.1 % busy, under 90 %)" || !close1(full.Ratio, 9669.0/15710) {
		t.Errorf("full-load mark: got %+v", full)
	}
	if half.Met == nil || !*half.Met || half.Note != "" {
		t.Errorf("half-load mark: got %+v", half)
	}

	md := throughputMarkdown(throughputReport{Meta: meta{ProxyCPUs: "0", LoadCPUs: "1"}, Targets: results, Goals: got},
		throughputPlan{reps: 1})
	for _, want := range []string{
		"| nginx + limit_req (**load-bound**, 66.1 % busy) | 15710 |",
		"| memory | 9669 |",
		"| nginx + limit_req | 66 | 66 |",
		"| memory | 93 | 93 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("latest.md lacks %q:\n%s", want, md)
		}
	}
}

func TestParsePerCPU(t *testing.T) {
	stat := "cpu  9 9 9 9 9 9 9 9 0 0\ncpu0 100 2 30 400 7 4 5 6 0 0\ncpu1 1 1 1 1 1 1 1 1 0 0\nintr 5\n"
	got, err := parsePerCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := (cpuTimes{busy: 100 + 2 + 30 + 4 + 5 + 6, irq: 4 + 5, total: 554}); got[0] != want || len(got) != 2 {
		t.Fatalf("got %+v, want cpu0 %+v and two CPUs", got, want)
	}
	if s := sumCPUs(got, []int{0, 1}); s.busy != 153 || s.irq != 11 || s.total != 562 {
		t.Errorf("sum: got %+v", s)
	}
	if _, err := parsePerCPU("cpu  1 2 3 4 5 6 7 8\n"); err == nil {
		t.Error("no per-CPU line: want error")
	}
}

func TestCPUList(t *testing.T) {
	for list, want := range map[string][]int{"0": {0}, "0,1": {0, 1}, "0-3": {0, 1, 2, 3}, "0-1,4": {0, 1, 4}, "x,2": {2}, "3-1": nil} {
		if got := cpuList(list); !slices.Equal(got, want) {
			t.Errorf("cpuList(%q) = %v, want %v", list, got, want)
		}
	}
}

// tool finds name in PATH; without it the test is skipped, or fails when
// the environment says the tools are installed (scripts/test.sh).
func tool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("RLPROXY_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%s not found and RLPROXY_REQUIRE_TOOLS=1", name)
		}
		t.Skipf("skipping: %s not installed", name)
	}
}

// TestSlowedUpstreamIsFlagged runs the harness's own path — nginx
// proxy_pass started and pinned by the lab, wrk, the CPU accounting — in
// front of an upstream that waits 2 ms before every response. Four
// connections then get at most 2,000 responses a second, a few % of one
// CPU for nginx: the row must come out load-bound, with no mark.
func TestSlowedUpstreamIsFlagged(t *testing.T) {
	for _, name := range []string{"nginx", "wrk", "taskset"} {
		tool(t, name)
	}
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * time.Millisecond)
		_, _ = w.Write([]byte("hello, world\n"))
	}))
	defer slow.Close()

	// nginx's worker runs as nobody: the scratch directory must be
	// reachable (t.TempDir's parent is not).
	runDir, err := os.MkdirTemp("", "benchrun-test.")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(runDir)
	if err := os.Chmod(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	sup := &supervisor{runDir: runDir}
	defer sup.stop()
	l := &lab{sup: sup, configDir: filepath.Join("..", "..", "configs"), proxyCPUs: "0", loadCPUs: "0"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	specs := []targetSpec{{id: "nginx", name: "nginx proxy_pass", kind: "nginx", conf: "nginx-proxy.conf"}}
	targets := startTargets(ctx, l, specs, "", strings.TrimPrefix(slow.URL, "http://"), func(string) {})
	if len(targets) != 1 || targets[0].Status != "ok" {
		t.Fatalf("nginx: %+v", targets)
	}

	b := &bench{wrk: wrkRunner{cpus: "0", script: filepath.Join("..", "..", "wrk", "report.lua")}, hz: clockTicks(),
		ncpu: machineCPUs(), proxyCPUs: []int{0}, loadCPUs: []int{0}}
	plan := throughputPlan{reps: 1, fullArgs: []string{"-t1", "-c4"}, fullDur: time.Second, halfArgs: []string{"-t1", "-c1"}, halfDur: time.Second}
	results := b.runThroughput(ctx, plan, targets, func(string) {})
	checkBound(results, 1, 1)
	r := results[0]
	if r.Status != "ok" || r.FullMedian == nil || r.FullMedian.RPS > 2000 {
		t.Fatalf("run: status %q, median %+v; want ≤ 2,000 req/s", r.Status, r.FullMedian)
	}
	if r.Bound == nil || !r.Bound.LoadBound || r.Bound.BusyPct >= 50 || r.FullMedian.ProxyCPUIdlePct == nil {
		t.Fatalf("slowed upstream: check %+v, median %+v; want load-bound, well under 50 %% busy", r.Bound, r.FullMedian)
	}
	md := throughputMarkdown(throughputReport{Meta: meta{ProxyCPUs: "0", LoadCPUs: "0"}, Targets: results}, plan)
	if !strings.Contains(md, "nginx proxy_pass (**load-bound**") || !strings.Contains(md, "**load-bound**: the proxy kept its CPU") {
		t.Errorf("latest.md does not flag the row:\n%s", md)
	}
}
