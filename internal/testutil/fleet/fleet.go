// Package fleet runs several real rlproxy processes (the cmd/rlproxy binary,
// built once per test binary with `go build`) from one configuration, for
// tests of what a fleet sharing a store does: quotas across instances, an
// instance killed mid-traffic, a graceful stop.
//
// Each process listens on a free loopback port picked by the kernel
// (listen: 127.0.0.1:0); the address is read from its "rlproxy serving" log
// line. Process logs are kept and shown when the test fails.
package fleet

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	yamlv3 "gopkg.in/yaml.v3"

	"rlproxy/internal/testutil/rlproxytest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary returns the path of an rlproxy binary built from this module's
// cmd/rlproxy, building it on first use (one build per test binary; the
// Go build cache makes repeats fast). The file lives in a temporary
// directory that is left for the OS to clean.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rlproxy-fleet-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "rlproxy")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "build", "-o", binPath, "rlproxy/cmd/rlproxy").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build rlproxy/cmd/rlproxy: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Proc is one rlproxy process.
type Proc struct {
	// URL is the public base URL, e.g. "http://127.0.0.1:41234".
	URL string
	// AdminURL is the admin base URL.
	AdminURL string
	// ConfigPath is the process's configuration file.
	ConfigPath string

	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	mu   sync.Mutex
	log  bytes.Buffer
}

// Fleet is N rlproxy processes started from one configuration.
type Fleet struct {
	// Procs are the processes, in start order (index i of URL, Kill, Stop).
	Procs []*Proc
}

// servingRE matches the startup log line (log/slog text format).
var servingRE = regexp.MustCompile(`msg="rlproxy serving" listen=(\S+) admin=(\S+)`)

// Start runs n rlproxy processes on yaml (a full configuration without
// listen and admin_listen, which Start adds as 127.0.0.1:0), waits until
// each has logged its addresses (at most 20 s) and registers cleanup:
// SIGKILL for any still running, and their logs in the test log if the
// test failed.
func Start(t testing.TB, n int, yaml string) *Fleet {
	t.Helper()
	return StartWith(t, n, yaml, Options{})
}

// Options tune StartWith.
type Options struct {
	// NoFile, when > 0, runs each process with this open-file limit (soft
	// and hard, through util-linux prlimit), e.g. to see what rlproxy does
	// when descriptors run short.
	NoFile int
}

// StartWith is Start with options.
func StartWith(t testing.TB, n int, yaml string, opts Options) *Fleet {
	t.Helper()
	bin := Binary(t)
	f := &Fleet{}
	for i := range n {
		dir := t.TempDir()
		path := filepath.Join(dir, "rlproxy.yaml")
		body := "listen: \"127.0.0.1:0\"\nadmin_listen: \"127.0.0.1:0\"\n" + withEngine(t, yaml)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		p := &Proc{ConfigPath: path, done: make(chan struct{})}
		p.cmd = exec.Command(bin, "-config", path)
		if opts.NoFile > 0 {
			// prlimit execs the command: the pid and signals are rlproxy's.
			p.cmd = exec.Command("prlimit", fmt.Sprintf("--nofile=%d:%d", opts.NoFile, opts.NoFile), "--", bin, "-config", path)
		}
		stderr, err := p.cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.cmd.Start(); err != nil {
			t.Fatalf("starting rlproxy %d: %v", i, err)
		}
		addrs := make(chan []string, 1)
		go func() {
			sc := bufio.NewScanner(stderr)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				p.mu.Lock()
				p.log.WriteString(line + "\n")
				p.mu.Unlock()
				if m := servingRE.FindStringSubmatch(line); m != nil {
					select {
					case addrs <- m[1:]:
					default:
					}
				}
			}
			_ = p.cmd.Wait()
			close(p.done)
		}()
		t.Cleanup(func() {
			p.Kill()
			if t.Failed() {
				t.Logf("rlproxy %d log:\n%s", i, p.Log())
			}
		})
		select {
		case a := <-addrs:
			p.URL, p.AdminURL = "http://"+a[0], "http://"+a[1]
		case <-p.done:
			t.Fatalf("rlproxy %d exited before serving:\n%s", i, p.Log())
		case <-time.After(20 * time.Second):
			t.Fatalf("rlproxy %d did not log its addresses in 20 s:\n%s", i, p.Log())
		}
		f.Procs = append(f.Procs, p)
	}
	return f
}

// URL returns process i's public base URL.
func (f *Fleet) URL(i int) string { return f.Procs[i].URL }

// AdminURL returns process i's admin base URL.
func (f *Fleet) AdminURL(i int) string { return f.Procs[i].AdminURL }

// Kill sends SIGKILL to process i (a crash) and waits for it to exit.
func (f *Fleet) Kill(i int) { f.Procs[i].Kill() }

// Stop sends SIGTERM to process i (graceful shutdown) and waits up to
// timeout for it to exit; it reports whether it did.
func (f *Fleet) Stop(i int, timeout time.Duration) bool { return f.Procs[i].Stop(timeout) }

// Kill sends SIGKILL and waits for the process to exit. Killing an exited
// process does nothing.
func (p *Proc) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits up to timeout for the process to exit; it
// reports whether it exited in time (it is killed otherwise).
func (p *Proc) Stop(timeout time.Duration) bool {
	select {
	case <-p.done:
		return true
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		p.Kill()
		return false
	}
}

// Exited reports whether the process has exited, and its exit code (-1
// when killed by a signal).
func (p *Proc) Exited() (bool, int) {
	select {
	case <-p.done:
		return true, p.cmd.ProcessState.ExitCode()
	default:
		return false, 0
	}
}

// Signal sends sig to the process (SIGHUP: a reload; SIGTERM: a graceful
// stop, without waiting for it as Stop does).
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Pid is the process id (for readings under /proc).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Log returns the process's stderr so far.
func (p *Proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Clone(p.log.String())
}

// withEngine returns yaml with server.engine set to the suite's engine
// (rlproxytest.Engine) when the file names none: a process reads only
// its file, so the suite's run on each engine reaches it this way.
func withEngine(t testing.TB, yaml string) string {
	t.Helper()
	engine := rlproxytest.Engine()
	if engine == "auto" {
		return yaml // the default: the file stays as written
	}
	var doc map[string]any
	if err := yamlv3.Unmarshal([]byte(yaml), &doc); err != nil {
		t.Fatalf("fleet config: %v", err)
	}
	if doc == nil {
		doc = map[string]any{}
	}
	server, _ := doc["server"].(map[string]any)
	if server == nil {
		server = map[string]any{}
	}
	if _, set := server["engine"]; set {
		return yaml
	}
	server["engine"] = engine
	doc["server"] = server
	out, err := yamlv3.Marshal(doc)
	if err != nil {
		t.Fatalf("fleet config: %v", err)
	}
	return string(out)
}
