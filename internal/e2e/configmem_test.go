package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rlproxy/internal/config"
	"rlproxy/internal/testutil/fleet"
	"rlproxy/internal/testutil/waitfor"
)

// memKeys is how many plan keys TestConfigMemory writes: 64,000 (2.6 MB
// file) in the normal suite, RLPROXY_CONFIGMEM_KEYS for the stress form
// (bench/configmem.sh: 1,280,000 keys, a 54 MB keys file and a 56 MB
// invalid config).
func memKeys(t *testing.T) int {
	if s := os.Getenv("RLPROXY_CONFIGMEM_KEYS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("RLPROXY_CONFIGMEM_KEYS=%q: want a count", s)
		}
		return n
	}
	return 64_000
}

// memConfig is a valid configuration with plan tiers; keys is its
// `keys_file:` or `keys:` line.
func memConfig(keys string) string {
	return `upstreams: { app: { builtin: echo } }
policies:
  free: { algorithm: fixed_window, limit: 10, window: 1h }
  pro: { algorithm: fixed_window, limit: 1000, window: 1h }
routes: [ { name: r, upstream: app, plan: tiers } ]
plans:
  tiers:
    key: header:X-API-Key
    default: free
    plans: { free: [free], pro: [pro] }
    ` + keys + "\n"
}

// memWriteKeys writes n `credential: plan` lines (indented by indent) to w.
func memWriteKeys(t *testing.T, path, head, indent, plan string, n int) int64 {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	w.WriteString(head)
	for i := range n {
		fmt.Fprintf(w, "%skey-%012d%020d: %s\n", indent, i, i*7919%1000003, plan)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	f.Close()
	return st.Size()
}

// memStatus reads VmHWM (peak) and VmRSS of a process, in bytes.
func memStatus(t *testing.T, pid int) (peak, rss int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && (f[0] == "VmHWM:" || f[0] == "VmRSS:") {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			if f[0] == "VmHWM:" {
				peak = kb << 10
			} else {
				rss = kb << 10
			}
		}
	}
	return peak, rss
}

// memValidatePeak runs `rlproxy validate` on cfg and returns its peak RSS
// (getrusage maxrss) in bytes; cfg must be valid.
func memValidatePeak(t *testing.T, cfg string) int64 {
	return memValidate(t, cfg, true)
}

// memValidate runs `rlproxy validate` on cfg, which must be valid (ok) or
// be refused, and returns its peak RSS in bytes.
func memValidate(t *testing.T, cfg string, ok bool) int64 {
	cmd := exec.Command(fleet.Binary(t), "validate", "-config", cfg)
	out, err := cmd.CombinedOutput()
	if (err == nil) != ok {
		t.Fatalf("validate %s: %v, want valid %v\n%.2000s", cfg, err, ok, out)
	}
	return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
}

// TestConfigMemory measures real rlproxy processes. Loading a valid
// keys_file of memKeys credentials (parsed line by line, no YAML tree)
// costs `rlproxy validate` at most 4× the file's size in peak RSS over a
// config without it, and a serving process too (which adds the policy
// layer's index of hashed credentials, then releases the config's copy);
// its steady RSS is logged. An invalid config of
// the same size (every credential inline, with an unknown plan) is refused
// by validate and on reload, each peaking at most 4× the file over where
// it started (the inline keys are read line by line, not as a YAML tree),
// with one log line under 64 KiB listing 100 problems and how many more,
// and RSS comes back within 50 MB of where it was.
func TestConfigMemory(t *testing.T) {
	n := memKeys(t)
	dir := t.TempDir()
	keysFile := filepath.Join(dir, "keys.yaml")
	size := memWriteKeys(t, keysFile, "", "", "pro", n)
	small, big := filepath.Join(dir, "small.yaml"), filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(small, []byte(memConfig("keys: {}")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, []byte(memConfig(fmt.Sprintf("keys_file: %q", keysFile))), 0o644); err != nil {
		t.Fatal(err)
	}
	vBase, vPeak := memValidatePeak(t, small), memValidatePeak(t, big)
	t.Logf("validate: keys_file of %d keys, %.1f MB: peak RSS %.1f MB, %.1f MB over %.1f MB without it (%.2f× the file)",
		n, mb(size), mb(vPeak), mb(vPeak-vBase), mb(vBase), float64(vPeak-vBase)/float64(size))
	if vPeak-vBase > 4*size {
		t.Errorf("validate: peak RSS %.1f MB over the baseline, want at most 4× the %.1f MB keys file", mb(vPeak-vBase), mb(size))
	}

	base := fleet.Start(t, 1, memConfig("keys: {}")).Procs[0]
	basePeak, baseRSS := memStatus(t, base.Pid())
	base.Kill()
	p := fleet.Start(t, 1, memConfig(fmt.Sprintf("keys_file: %q", keysFile))).Procs[0]
	peak, before := memStatus(t, p.Pid())
	t.Logf("serving with it: peak RSS %.1f MB (%.1f MB over %.1f MB without it: %.2f× the file), RSS %.1f MB (%.1f MB over %.1f MB: %.2f×)",
		mb(peak), mb(peak-basePeak), mb(basePeak), float64(peak-basePeak)/float64(size),
		mb(before), mb(before-baseRSS), mb(baseRSS), float64(before-baseRSS)/float64(size))
	if peak-basePeak > 4*size {
		t.Errorf("serving: peak RSS %.1f MB over the baseline, want at most 4× the %.1f MB keys file", mb(peak-basePeak), mb(size))
	}

	// The invalid config replaces the file: the watcher reloads it.
	head := "listen: \"127.0.0.1:0\"\nadmin_listen: \"127.0.0.1:0\"\n" + memConfig("keys:")
	tmp := p.ConfigPath + ".tmp"
	bad := memWriteKeys(t, tmp, head, "      ", "gold", n)
	badPeak := memValidate(t, tmp, false)
	t.Logf("validate of the invalid config (%.1f MB): peak RSS %.1f MB, %.1f MB over the baseline (%.2f× the file)",
		mb(bad), mb(badPeak), mb(badPeak-vBase), float64(badPeak-vBase)/float64(bad))
	if badPeak-vBase > 4*bad {
		t.Errorf("validate of the invalid config: peak RSS %.1f MB over the baseline, want at most 4× the %.1f MB file", mb(badPeak-vBase), mb(bad))
	}
	// The reload's own peak: VmHWM reset to the current RSS (proc(5),
	// clear_refs "5").
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.Pid()), []byte("5"), 0); err != nil {
		t.Fatalf("resetting the peak RSS: %v", err)
	}
	_, before = memStatus(t, p.Pid())
	if err := os.Rename(tmp, p.ConfigPath); err != nil {
		t.Fatal(err)
	}
	var line string
	if !waitfor.Poll(120*time.Second, func() bool {
		for _, l := range strings.Split(p.Log(), "\n") {
			if strings.Contains(l, "config reload refused") {
				line = l
			}
		}
		return line != ""
	}) {
		t.Fatalf("no refused reload in 120 s:\n%.4000s", p.Log())
	}
	// FreeOSMemory runs after the log line: a full collection, then the
	// scavenger returns the freed pages; give it up to 10 s.
	var after int64
	waitfor.Poll(10*time.Second, func() bool {
		peak, after = memStatus(t, p.Pid())
		return after <= before+50<<20
	})
	listed := strings.Count(line, "unknown plan")
	// Decoding stops at config.MaxProblems problems: the log line says so.
	more := fmt.Sprintf("and %d more problems", min(n, config.MaxProblems)-100)
	if n > config.MaxProblems {
		more += " (rlproxy validate lists them all)\\n(stopped after"
	}
	t.Logf("invalid config of %.1f MB (%d problems): log line %d bytes, %d listed; reload peak RSS %.1f MB, %.1f MB over %.1f MB before (%.2f× the file); RSS %.1f MB after",
		mb(bad), min(n, config.MaxProblems), len(line), listed, mb(peak), mb(peak-before), mb(before), float64(peak-before)/float64(bad), mb(after))
	if len(line) >= 64<<10 || listed != 100 || !strings.Contains(line, more) {
		t.Errorf("log line of %d bytes with %d problems, want < 64 KiB, 100 and %q:\n%.2000s", len(line), listed, more, line)
	}
	if peak-before > 4*bad {
		t.Errorf("refused reload: peak RSS %.1f MB over the %.1f MB before it, want at most 4× the %.1f MB file", mb(peak-before), mb(before), mb(bad))
	}
	if after > before+50<<20 {
		t.Errorf("RSS %.1f MB after the refused reload, want within 50 MB of %.1f MB", mb(after), mb(before))
	}
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }
