package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"rlproxy/internal/testutil/netutil"
)

// startTimeout bounds how long a started server may take to answer.
const startTimeout = 15 * time.Second

// stopTimeout is how long a process group gets after SIGTERM before SIGKILL.
const stopTimeout = 3 * time.Second

// supervisor starts the benchmark's servers, each pinned with taskset in its
// own process group, and stops them all in stop. Every group id is also
// appended to runDir/pgids so run.sh can kill them by id if this program is
// itself killed. Safe for concurrent use.
type supervisor struct {
	runDir string
	nice   int // niceness of every started server (0: inherited)

	mu    sync.Mutex
	procs []*proc
}

// proc is one started server (the process taskset exec'd into).
type proc struct {
	name   string
	cmd    *exec.Cmd
	log    string        // path of its combined stdout+stderr
	exited chan struct{} // closed when Wait returns
}

// start runs argv pinned to cpus (a taskset list such as "0" or "0,1") with
// GOMAXPROCS set to the number of those CPUs, output to runDir/NAME.log.
func (s *supervisor) start(name, cpus string, env []string, argv ...string) (*proc, error) {
	logPath := filepath.Join(s.runDir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating log: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command("taskset", pinned(cpus, s.nice, argv)...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(cpuCount(cpus))), env...)
	// Own group: nginx's workers die with their master when the group is
	// signalled. Pdeathsig covers this program being killed outright.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	if f, err := os.OpenFile(filepath.Join(s.runDir, "pgids"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		fmt.Fprintln(f, cmd.Process.Pid)
		f.Close()
	}
	return p, nil
}

// stop terminates every started process group: SIGTERM, then SIGKILL after
// stopTimeout.
func (s *supervisor) stop() {
	s.mu.Lock()
	procs := s.procs
	s.procs = nil
	s.mu.Unlock()
	for _, p := range procs {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	}
	deadline := time.After(stopTimeout)
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-deadline:
		}
	}
	for _, p := range procs {
		// The group may outlive its leader (nginx workers): always KILL it.
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// pid is the process id of the started server (taskset execs into it).
func (p *proc) pid() int { return p.cmd.Process.Pid }

// failure describes why p did not come up: the error and its log's tail.
func (p *proc) failure(err error) string {
	msg := err.Error()
	if tail := logTail(p.log, 3); tail != "" {
		msg += ": " + tail
	}
	return msg
}

// waitHTTP polls url until it answers with 200, p exits, or startTimeout.
func (p *proc) waitHTTP(ctx context.Context, url string) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	return p.poll(ctx, func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
		}
		return nil
	})
}

// waitTCP polls addr until it accepts a connection, p exits, or startTimeout.
func (p *proc) waitTCP(ctx context.Context, addr string) error {
	return p.poll(ctx, func() error { return netutil.Accepts(addr) })
}

// poll calls try every 50 ms until it succeeds, p exits, or startTimeout.
func (p *proc) poll(ctx context.Context, try func() error) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	switch err := netutil.Poll(ctx, p.exited, 50*time.Millisecond, try); {
	case errors.Is(err, netutil.ErrExited):
		return fmt.Errorf("%s exited", p.name)
	case err != nil:
		return fmt.Errorf("waiting for %s: %w", p.name, err)
	}
	return nil
}

// logTail returns the last n non-empty lines of a file, joined by " | ".
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// pinned is taskset's arguments to run argv on cpus at niceness nice
// (through nice(1) unless 0). Both exec the program, so the started
// process's PID is the program's own.
func pinned(cpus string, nice int, argv []string) []string {
	args := []string{"-c", cpus}
	if nice != 0 {
		args = append(args, "nice", "-n", strconv.Itoa(nice))
	}
	return append(args, argv...)
}

// prioritise gives this process and everything it starts niceness nice
// (0: nothing to do) against the rest of the machine, and says how. nice(1)
// alone is not enough where the kernel groups processes by session
// (/proc/sys/kernel/sched_autogroup_enabled, sched(7) "The autogroup
// feature"): niceness then only orders the processes of one session, and
// every session weighs the same as any other. So this process starts a
// session of its own (it must not lead a process group: run.sh starts it
// in the background) and sets that session's autogroup niceness. Errors:
// no new session, or not allowed (a negative niceness needs CAP_SYS_NICE).
func prioritise(nice int) (string, error) {
	if nice == 0 {
		return "", nil
	}
	if b, err := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled"); err != nil || strings.TrimSpace(string(b)) != "1" {
		return "nice(1)", nil
	}
	if _, err := syscall.Setsid(); err != nil {
		return "", fmt.Errorf("niceness %d: starting a session of its own (run it through bench/run.sh): %w", nice, err)
	}
	if err := os.WriteFile("/proc/self/autogroup", []byte(strconv.Itoa(nice)), 0); err != nil {
		return "", fmt.Errorf("niceness %d: setting the session's autogroup: %w", nice, err)
	}
	return "nice(1) and the session's autogroup", nil
}

// cpuCount counts the CPUs of a taskset list such as "0", "0,1" or "0-3"
// (at least 1).
func cpuCount(list string) int {
	return max(len(cpuList(list)), 1)
}

// procStat is what the benchmark reads from /proc/PID/stat.
type procStat struct {
	ppid  int
	ticks int64 // utime + stime, in clock ticks (USER_HZ)
}

// parseProcStat parses the content of /proc/PID/stat (proc(5)): the command
// name is in parentheses and may hold spaces, so fields are counted from
// the last ')'. ppid is field 4, utime 14, stime 15.
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("parsing stat: no ')'")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("parsing stat: %d fields after comm", len(f))
	}
	// f[0] is field 3 (state), so field k is f[k-3].
	ppid, err1 := strconv.Atoi(f[1])
	ut, err2 := strconv.ParseInt(f[11], 10, 64)
	st, err3 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return procStat{}, fmt.Errorf("parsing stat: %w", err)
	}
	return procStat{ppid: ppid, ticks: ut + st}, nil
}

// treeTicks sums utime+stime over root and all its live descendants (for
// nginx: master plus workers).
func treeTicks(root int) (int64, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("reading /proc: %w", err)
	}
	stats := map[int]procStat{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		if st, err := parseProcStat(b); err == nil {
			stats[pid] = st
		}
	}
	rootStat, ok := stats[root]
	if !ok {
		return 0, fmt.Errorf("process %d is gone", root)
	}
	total := rootStat.ticks
	inTree := map[int]bool{root: true}
	for grew := true; grew; {
		grew = false
		for pid, st := range stats {
			if !inTree[pid] && inTree[st.ppid] {
				inTree[pid] = true
				total += st.ticks
				grew = true
			}
		}
	}
	return total, nil
}

// clockTicks returns USER_HZ (getconf CLK_TCK), 100 on Linux when getconf fails.
func clockTicks() int64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 100
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil || n <= 0 {
		return 100
	}
	return n
}

// firstLine returns the first line of a command's output, or "" on error.
func firstLine(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil && len(out) == 0 {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			return l
		}
	}
	return ""
}

// busyTicks sums the non-idle time of all CPUs from /proc/stat's "cpu" line
// (user, nice, system, irq, softirq, steal; proc(5)), in clock ticks.
func busyTicks() (int64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("reading /proc/stat: %w", err)
	}
	return parseBusyTicks(string(b))
}

func parseBusyTicks(stat string) (int64, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, errors.New("parsing /proc/stat: no aggregate cpu line")
	}
	var total int64
	// f[1..8]: user nice system idle iowait irq softirq steal.
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parsing /proc/stat: %w", err)
		}
		total += n
	}
	return total, nil
}

// machineCPUs counts the machine's CPUs from /proc/cpuinfo (not
// runtime.NumCPU, which sees only this pinned process's affinity).
func machineCPUs() int {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 1
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if k, _, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "processor" {
			n++
		}
	}
	return max(n, 1)
}

// quietGate holds a run back while other processes load the machine: on a
// shared machine (other builds and tests) a run under foreign load measures
// that load. The benchmark's own servers are idle between runs and are
// children of this process, so they are not counted.
type quietGate struct {
	maxPct   float64       // % of all CPUs other processes may use; 0 disables
	maxWait  time.Duration // then the run goes ahead anyway
	hz       int64
	ncpu     int
	progress func(string)
}

// wait returns once a 1 s sample of foreign CPU is under maxPct, or after
// maxWait; an error only when ctx ends.
func (q quietGate) wait(ctx context.Context) error {
	if q.maxPct <= 0 {
		return nil
	}
	deadline := time.Now().Add(q.maxWait)
	for {
		pct, err := q.foreignPct(ctx, time.Second)
		if err != nil || pct < q.maxPct {
			return err
		}
		if time.Now().After(deadline) {
			q.progress(fmt.Sprintf("  machine still busy (%.0f%% of CPUs used by other processes); running anyway", pct))
			return nil
		}
	}
}

// foreignPct samples, over d, the CPU used by processes outside this one's
// tree, in % of all CPUs.
func (q quietGate) foreignPct(ctx context.Context, d time.Duration) (float64, error) {
	sys0, err := busyTicks()
	if err != nil {
		return 0, err
	}
	own0, err := treeTicks(os.Getpid())
	if err != nil {
		return 0, err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(d):
	}
	sys1, err := busyTicks()
	if err != nil {
		return 0, err
	}
	own1, err := treeTicks(os.Getpid())
	if err != nil {
		return 0, err
	}
	foreign := float64(sys1-sys0-(own1-own0)) / float64(q.hz)
	return min(max(0, 100*foreign/(time.Since(start).Seconds()*float64(q.ncpu))), 100), nil
}
