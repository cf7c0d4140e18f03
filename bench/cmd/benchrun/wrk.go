package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// wrkPrefix marks the JSON line printed by bench/wrk/report.lua.
const wrkPrefix = "BENCHJSON "

// wrkReport is the JSON line of bench/wrk/report.lua; latencies in µs.
type wrkReport struct {
	Requests   int64   `json:"requests"`
	DurationUs int64   `json:"duration_us"`
	Bytes      int64   `json:"bytes"`
	ErrConnect int64   `json:"err_connect"`
	ErrRead    int64   `json:"err_read"`
	ErrWrite   int64   `json:"err_write"`
	ErrStatus  int64   `json:"err_status"` // responses outside 2xx/3xx
	ErrTimeout int64   `json:"err_timeout"`
	P50us      float64 `json:"p50_us"`
	P90us      float64 `json:"p90_us"`
	P99us      float64 `json:"p99_us"`
	MaxUs      float64 `json:"max_us"`
	MeanUs     float64 `json:"mean_us"`

	// CPUus is wrk's own utime+stime (from its rusage), in µs; set by run.
	CPUus float64 `json:"-"`
}

// rps is requests per second over wrk's measured duration.
func (r wrkReport) rps() float64 {
	if r.DurationUs <= 0 {
		return 0
	}
	return float64(r.Requests) / (float64(r.DurationUs) / 1e6)
}

// socketErrors is wrk's "Socket errors" total.
func (r wrkReport) socketErrors() int64 {
	return r.ErrConnect + r.ErrRead + r.ErrWrite + r.ErrTimeout
}

// parseWrkOutput finds report.lua's line in wrk's stdout.
func parseWrkOutput(out string) (wrkReport, error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, wrkPrefix); ok {
			var r wrkReport
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				return wrkReport{}, fmt.Errorf("parsing wrk report: %w", err)
			}
			return r, nil
		}
	}
	return wrkReport{}, errors.New("parsing wrk report: no " + strings.TrimSpace(wrkPrefix) + " line (is -s report.lua set?)")
}

// splitDuration removes wrk's duration option (-d5s, -d 5s, --duration 5s,
// --duration=5s) from args and returns the rest and the duration; wrk's
// default is 10 s, and a bare number means seconds.
func splitDuration(args []string) ([]string, time.Duration, error) {
	var rest []string
	d := "10s"
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-d" || a == "--duration":
			if i+1 >= len(args) {
				return nil, 0, fmt.Errorf("wrk option %s: missing value", a)
			}
			d = args[i+1]
			i++
		case strings.HasPrefix(a, "--duration="):
			d = strings.TrimPrefix(a, "--duration=")
		case strings.HasPrefix(a, "-d") && len(a) > 2:
			d = a[2:]
		default:
			rest = append(rest, a)
		}
	}
	dur, err := parseWrkDuration(d)
	return rest, dur, err
}

// parseWrkDuration reads wrk's time syntax: 5s, 2m, 1h, or a number of seconds.
func parseWrkDuration(s string) (time.Duration, error) {
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Duration(n * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("wrk duration %q: want e.g. 5s", s)
	}
	return d, nil
}

// wrkSeconds renders d for wrk's -d, which takes whole seconds: rounded up,
// at least 1 s.
func wrkSeconds(d time.Duration) string {
	s := max(int64((d+time.Second-1)/time.Second), 1)
	return strconv.FormatInt(s, 10) + "s"
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// wrkRunner runs wrk pinned to the load generator's CPUs.
type wrkRunner struct {
	cpus   string
	script string // path of bench/wrk/report.lua
	nice   int    // niceness of wrk (0: inherited)
}

// run runs wrk with args (without a duration), duration d and --latency
// against url, bounded to d plus 30 s. delayMs > 0 makes every connection
// wait that many ms after each response (report.lua's delay hook); keys >
// 0 sends the requests with that many X-API-Key values in turn.
func (w wrkRunner) run(ctx context.Context, args []string, d time.Duration, delayMs, keys int, url string) (wrkReport, error) {
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	argv := append(append([]string{"wrk"}, args...), "-d", wrkSeconds(d), "--latency", "-s", w.script, url)
	cmd := exec.CommandContext(ctx, "taskset", pinned(w.cpus, w.nice, argv)...)
	cmd.Env = append(os.Environ(), "BENCH_DELAY_MS="+strconv.Itoa(delayMs), "BENCH_KEYS="+strconv.Itoa(keys))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkReport{}, fmt.Errorf("running wrk %s: %w: %s", strings.Join(argv[1:], " "), err, lastLine(string(out)))
	}
	rep, err := parseWrkOutput(string(out))
	if err != nil {
		return wrkReport{}, err
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rep.CPUus = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
	}
	return rep, nil
}
