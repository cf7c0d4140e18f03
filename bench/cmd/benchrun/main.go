// Command benchrun is the rlproxy benchmark harness, normally run
// by bench/run.sh (throughput) and bench/attack.sh (attack scenario), which
// install the tools and build the binaries first.
//
// Throughput mode starts a shared upstream and every target — the upstream
// direct, nginx proxy_pass, nginx + limit_req, Caddy, minproxy and rlproxy
// without a policy, with a token bucket on memory and on Valkey — each on its
// own loopback port, then measures them with the same wrk load round-robin
// for R rounds and reports medians: req/s, p50/p99 latency, proxy CPU-µs per
// request (utime+stime from /proc), each also as a ratio to nginx +
// limit_req, plus a fewer-connection pass for the latency added over direct.
//
// Attack mode sends well-behaved clients' traffic with and without one
// over-limit attacker through nginx limit_req and rlproxy (memory, Valkey)
// and reports their latency, how much of the attacker reached the upstream,
// and Valkey calls per refused request.
//
// Everything listens on 127.0.0.1 only; every server is pinned with taskset
// and killed (its whole process group) on exit or on SIGINT/SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(1)
	}
}

// options are the command-line flags.
type options struct {
	mode                  string
	binDir, configDir     string
	rlproxyBin, outDir    string
	baseBin               string
	runDir, wrkScript     string
	proxyCPUs, loadCPUs   string
	wrkArgs, halfArgs     string
	reps, halfDelayMs     int
	warmup                time.Duration
	targets               string
	attackDur             time.Duration
	clients               int
	clientRate, attackRPS float64
	quietPct, maxBgPct    float64
	quietWait             time.Duration
	redraw                string
	upstream              string
	nice                  int
	niceHow               string // how nice was applied (prioritise)
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.mode, "mode", "throughput", "throughput | attack")
	flag.StringVar(&o.binDir, "bin", "bench/.bin", "directory holding the built upstream and minproxy")
	flag.StringVar(&o.configDir, "configs", "bench/configs", "directory of the target configs")
	flag.StringVar(&o.rlproxyBin, "rlproxy", "bench/.bin/rlproxy", "rlproxy binary; missing = rlproxy rows \"not built\"")
	flag.StringVar(&o.baseBin, "rlproxy-base", "", "rlproxy binary of the A/B base build (BENCH_BASE); every rlproxy row gets a twin on it")
	flag.StringVar(&o.outDir, "out", "bench/results", "where latest.{md,json,svg} / attack.{md,json} go")
	flag.StringVar(&o.runDir, "run-dir", "", "scratch directory for configs, logs and pgids (default: a new temp dir, removed at exit)")
	flag.StringVar(&o.wrkScript, "wrk-script", "bench/wrk/report.lua", "wrk Lua script printing the BENCHJSON line")
	flag.StringVar(&o.proxyCPUs, "proxy-cpus", "0", "taskset CPU list of the proxy under test")
	flag.StringVar(&o.loadCPUs, "load-cpus", "1", "taskset CPU list of wrk, the upstream, Valkey and the attack load generator")
	flag.StringVar(&o.wrkArgs, "wrk", "-t1 -c32 -d5s", "wrk options of the full-load pass")
	flag.StringVar(&o.halfArgs, "half-wrk", "-t1 -c8 -d5s", "wrk options of the half-load pass")
	flag.IntVar(&o.halfDelayMs, "half-delay-ms", 1, "half-load pass: each connection waits this many ms after every response (0 = closed loop)")
	flag.IntVar(&o.reps, "r", 3, "rounds over all targets (median reported)")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unrecorded wrk run before each full-load run (0 = none)")
	flag.StringVar(&o.targets, "targets", "", "comma-separated target ids to run (default all)")
	flag.DurationVar(&o.attackDur, "attack-duration", 10*time.Second, "length of each attack-scenario phase")
	flag.IntVar(&o.clients, "attack-clients", 50, "well-behaved clients")
	flag.Float64Var(&o.clientRate, "client-rate", 5, "requests per second per well-behaved client (limit: 10)")
	flag.Float64Var(&o.attackRPS, "attack-rate", 500, "attacker requests per second")
	flag.Float64Var(&o.quietPct, "quiet-pct", 10, "before each run, wait until other processes use less than this % of all CPUs (0 = don't wait)")
	flag.DurationVar(&o.quietWait, "quiet-wait", 30*time.Second, "longest wait for quiet before a run; then it runs anyway")
	flag.Float64Var(&o.maxBgPct, "max-bg-pct", 20, "repeat (up to 2 times) a run during which other processes used more than this % of all CPUs (0 = never)")
	flag.StringVar(&o.upstream, "upstream", upstreamNginx, "throughput upstream: "+upstreamNginx+" (nginx return 200, configs/"+upstreamConf+") or "+upstreamGo+" (bench/upstream)")
	flag.IntVar(&o.nice, "nice", 0, "niceness of the benchmark's servers and wrk (nice(1); negative needs root): on a machine shared with other work, lets that work yield to the measurement (0 = inherited)")
	flag.StringVar(&o.redraw, "redraw", "", "measure nothing: recompute the medians, ratios and marks of this latest.json from its runs and rewrite it with its .md and .svg, then exit")
	flag.Parse()
	return o
}

func run() error {
	o := parseFlags()
	if o.redraw != "" {
		return redraw(o.redraw)
	}
	if o.reps < 1 || o.clients < 1 || o.clientRate <= 0 || o.attackRPS <= 0 || o.attackDur <= 0 {
		return errors.New("-r, -attack-clients, -client-rate, -attack-rate and -attack-duration must be positive")
	}
	how, err := prioritise(o.nice)
	if err != nil {
		return err
	}
	o.niceHow = how
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if o.runDir == "" {
		dir, err := os.MkdirTemp("", "rlbench.")
		if err != nil {
			return fmt.Errorf("making run dir: %w", err)
		}
		defer os.RemoveAll(dir)
		o.runDir = dir
	}
	// nginx workers run as nobody and need to reach their temp paths.
	if err := os.Chmod(o.runDir, 0o755); err != nil {
		return fmt.Errorf("opening run dir: %w", err)
	}
	sup := &supervisor{runDir: o.runDir, nice: o.nice}
	defer sup.stop()
	l := &lab{sup: sup, configDir: o.configDir, binDir: o.binDir, rlproxyBin: o.rlproxyBin, baseBin: o.baseBin, proxyCPUs: o.proxyCPUs, loadCPUs: o.loadCPUs}
	progress := func(s string) { fmt.Fprintln(os.Stderr, s) }

	switch o.mode {
	case "throughput":
		return runThroughputMode(ctx, o, l, progress)
	case "attack":
		return runAttackMode(ctx, o, l, progress)
	}
	return fmt.Errorf("unknown -mode %q: want throughput or attack", o.mode)
}

// selected reports whether id is among the comma-separated ids (all when empty).
func selected(ids, id string) bool {
	if ids == "" {
		return true
	}
	for _, s := range strings.Split(ids, ",") {
		if strings.TrimSpace(s) == id {
			return true
		}
	}
	return false
}

// startTargets starts the selected specs in front of upstreamAddr.
func startTargets(ctx context.Context, l *lab, specs []targetSpec, only, upstreamAddr string, progress func(string)) []*target {
	var targets []*target
	for _, s := range specs {
		if !selected(only, strings.TrimSuffix(s.id, baseSuffix)) || (only == "" && s.optIn) { // a twin follows its row
			continue
		}
		t := &target{ID: s.id, Name: s.name, Keys: s.keys, PollPage: s.pollPage}
		if s.kind == "direct" {
			t.Status, t.URL = "ok", "http://"+upstreamAddr+"/"
		} else {
			l.startProxy(ctx, t, s.kind, s.conf, upstreamAddr, s.valkey, s.admin)
		}
		progress(fmt.Sprintf("%-32s %s", t.Name, t.Status))
		targets = append(targets, t)
	}
	return targets
}

// newPlan is the throughput plan of wrk options wrkArgs (full load) and
// halfArgs (half load), each with its duration (-d), and the other
// settings. Errors: a -d that does not parse.
func newPlan(wrkArgs, halfArgs string, halfDelayMs, reps int, warmup time.Duration, maxBgPct float64) (throughputPlan, error) {
	fullArgs, fullDur, err := splitDuration(strings.Fields(wrkArgs))
	if err != nil {
		return throughputPlan{}, err
	}
	half, halfDur, err := splitDuration(strings.Fields(halfArgs))
	if err != nil {
		return throughputPlan{}, err
	}
	return throughputPlan{reps: reps, fullArgs: fullArgs, fullDur: fullDur, halfArgs: half, halfDur: halfDur, halfDelayMs: halfDelayMs, warmup: warmup, maxBgPct: maxBgPct}, nil
}

func runThroughputMode(ctx context.Context, o options, l *lab, progress func(string)) error {
	plan, err := newPlan(o.wrkArgs, o.halfArgs, o.halfDelayMs, o.reps, o.warmup, o.maxBgPct)
	if err != nil {
		return err
	}

	var up *proc
	var upAddr, upDesc string
	switch o.upstream {
	case upstreamNginx:
		up, upAddr, err = l.startNginxUpstream(ctx)
		upDesc = "nginx return 200 (configs/" + upstreamConf + "), 13-byte body"
	case upstreamGo:
		up, upAddr, err = l.startUpstream(ctx, "")
		upDesc = "bench/upstream (Go), 13-byte body"
	default:
		err = fmt.Errorf("-upstream %q: want %s or %s", o.upstream, upstreamNginx, upstreamGo)
	}
	if err != nil {
		return fmt.Errorf("starting upstream: %w", err)
	}
	targets := startTargets(ctx, l, withBaseTwins(throughputTargets(), o.baseBin != ""), o.targets, upAddr, progress)
	hz, ncpu := clockTicks(), machineCPUs()
	b := &bench{wrk: wrkRunner{cpus: o.loadCPUs, script: o.wrkScript, nice: o.nice}, upstream: up, hz: hz, ncpu: ncpu,
		proxyCPUs: cpuList(o.proxyCPUs), loadCPUs: cpuList(o.loadCPUs),
		quiet: quietGate{maxPct: o.quietPct, maxWait: o.quietWait, hz: hz, ncpu: ncpu, progress: progress}}
	results := b.runThroughput(ctx, plan, targets, progress)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	checkBound(results, cpuCount(o.proxyCPUs), cpuCount(o.loadCPUs))
	rep := throughputReport{Meta: collectMeta(l, map[string]string{
		"wrk": o.wrkArgs, "half_wrk": o.halfArgs, "half_delay_ms": strconv.Itoa(o.halfDelayMs), "r": strconv.Itoa(o.reps), "warmup": o.warmup.String(),
		"upstream":  upDesc,
		"quiet_pct": strconv.FormatFloat(o.quietPct, 'f', -1, 64), "quiet_wait": o.quietWait.String(),
		"max_bg_pct": strconv.FormatFloat(o.maxBgPct, 'f', -1, 64), "nice": strconv.Itoa(o.nice), "nice_how": o.niceHow,
	}), Targets: results, Goals: evalGoals(results, append(issueGoals(), abGoals(results)...))}
	md, err := writeThroughput(o.outDir, "latest", rep, plan)
	if err != nil {
		return err
	}
	fmt.Print(md)
	return nil
}

// writeThroughput writes rep as name.md, name.json and name.svg (the chart)
// into dir and returns the Markdown. A run that measured nothing (every
// target failed or not built) has no chart: an older one is removed rather
// than left to mislead.
func writeThroughput(dir, name string, rep throughputReport, plan throughputPlan) (string, error) {
	md := throughputMarkdown(rep, plan)
	if err := writeReport(dir, name, md, rep); err != nil {
		return "", err
	}
	svg := filepath.Join(dir, name+".svg")
	if rps, _ := chartPanels(rep); len(rps) == 0 {
		if err := os.Remove(svg); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("removing old chart: %w", err)
		}
		return md, nil
	}
	if err := writeChart(svg, rep); err != nil {
		return "", err
	}
	return md, nil
}

// redraw rewrites everything the throughput report in the JSON file at
// path (latest.json) derives from its runs: the medians and ratios, issue
// 7's marks (the "goals"), the Markdown and the chart, beside path as
// NAME.{json,md,svg}; the plan is read from the report's settings, the
// runs are kept as they are. A changed report needs no new 15-minute run.
// Errors: reading or decoding path, not a throughput report (no wrk
// settings, e.g. attack.json), settings that do not parse, writing.
func redraw(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading report: %w", err)
	}
	var rep throughputReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("reading report %s: %w", path, err)
	}
	set := rep.Meta.Settings
	if set["wrk"] == "" {
		return fmt.Errorf("reading report %s: not a throughput report (no meta.settings.wrk)", path)
	}
	// setting parses meta.settings[key], naming the key when it does not.
	setting := func(key string, parse func(string) error) error {
		if err := parse(set[key]); err != nil {
			return fmt.Errorf("reading report %s: meta.settings.%s %q: %w", path, key, set[key], err)
		}
		return nil
	}
	var delayMs, reps int
	var warmup time.Duration
	var maxBg float64
	if err := errors.Join(
		setting("half_delay_ms", func(v string) (err error) { delayMs, err = strconv.Atoi(v); return err }),
		setting("r", func(v string) (err error) { reps, err = strconv.Atoi(v); return err }),
		setting("warmup", func(v string) (err error) { warmup, err = time.ParseDuration(v); return err }),
		setting("max_bg_pct", func(v string) (err error) { maxBg, err = strconv.ParseFloat(v, 64); return err }),
	); err != nil {
		return err
	}
	plan, err := newPlan(set["wrk"], set["half_wrk"], delayMs, reps, warmup, maxBg)
	if err != nil {
		return fmt.Errorf("reading report %s: meta.settings.wrk / half_wrk: %w", path, err)
	}
	summarize(rep.Targets)
	checkBound(rep.Targets, cpuCount(rep.Meta.ProxyCPUs), cpuCount(rep.Meta.LoadCPUs))
	rep.Goals = evalGoals(rep.Targets, append(issueGoals(), abGoals(rep.Targets)...))
	base := filepath.Base(path)
	_, err = writeThroughput(filepath.Dir(path), strings.TrimSuffix(base, filepath.Ext(base)), rep, plan)
	return err
}

func runAttackMode(ctx context.Context, o options, l *lab, progress func(string)) error {
	plan := attackPlan{dur: o.attackDur, clients: o.clients, clientRate: o.clientRate, attackRate: o.attackRPS, header: "X-API-Key"}
	_, upAddr, err := l.startUpstream(ctx, plan.header)
	if err != nil {
		return fmt.Errorf("starting upstream: %w", err)
	}
	targets := startTargets(ctx, l, attackTargets(), o.targets, upAddr, progress)
	hz, ncpu := clockTicks(), machineCPUs()
	env := attackEnv{upstreamAddr: upAddr, hz: hz, ncpu: ncpu, quiet: quietGate{maxPct: o.quietPct, maxWait: o.quietWait, hz: hz, ncpu: ncpu, progress: progress}}
	results := env.runAttack(ctx, plan, targets, progress)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	rep := attackReport{Meta: collectMeta(l, map[string]string{
		"attack_duration": o.attackDur.String(), "clients": strconv.Itoa(o.clients),
		"client_rate": strconv.FormatFloat(o.clientRate, 'f', -1, 64), "attack_rate": strconv.FormatFloat(o.attackRPS, 'f', -1, 64),
		"quiet_pct": strconv.FormatFloat(o.quietPct, 'f', -1, 64), "quiet_wait": o.quietWait.String(),
	}), Targets: results}
	md := attackMarkdown(rep, plan)
	if err := writeReport(o.outDir, "attack", md, rep); err != nil {
		return err
	}
	fmt.Print(md)
	return nil
}
