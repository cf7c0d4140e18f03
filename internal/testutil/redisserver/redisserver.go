// Package redisserver starts a real redis-server on a free loopback port for
// tests: the distributed behaviour of rlproxy (atomic Lua decisions, shared
// counters, outages) is only claimed against a real server, never a fake.
//
// redis-server is taken from PATH. When it is missing the test is skipped,
// unless the environment sets RLPROXY_REQUIRE_REDIS=1 (CI), where it fails.
package redisserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/waitfor"
)

// startTimeout bounds how long a (re)started server may take to answer PING.
const startTimeout = 10 * time.Second

// Server is one redis-server process owned by a test. Its methods are safe
// for use by concurrent goroutines.
type Server struct {
	// Addr is "127.0.0.1:port"; it stays the same across Restart.
	Addr string

	t    testing.TB
	bin  string
	args []string

	mu     sync.Mutex
	proc   *netutil.Process // nil while stopped
	client valkey.Client    // lazily created by Client
}

// Start runs redis-server on a free loopback port without persistence
// (--save "" --appendonly no), with extraArgs appended (e.g. "--maxmemory",
// "1mb"), waits until it answers PING and registers cleanup (kill and wait).
func Start(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	return start(t, nil, extraArgs)
}

// StartSentinel runs a Redis Sentinel (redis-server --sentinel) on a free
// loopback port that monitors master under the name masterName with quorum
// 1, so SENTINEL GET-MASTER-ADDR-BY-NAME answers at once.
func StartSentinel(t testing.TB, masterName string, master *Server) *Server {
	t.Helper()
	host, port, err := net.SplitHostPort(master.Addr)
	if err != nil {
		t.Fatalf("starting sentinel: master address: %v", err)
	}
	// Sentinel rewrites its config file, so it must be a writable file.
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	line := fmt.Sprintf("sentinel monitor %s %s %s 1\n", masterName, host, port)
	if err := os.WriteFile(conf, []byte(line), 0o600); err != nil {
		t.Fatalf("starting sentinel: %v", err)
	}
	return start(t, []string{conf, "--sentinel"}, nil)
}

// start runs the server binary with leading (a config file must come
// first), the common options and extra.
func start(t testing.TB, leading, extra []string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("RLPROXY_REQUIRE_REDIS") == "1" {
			t.Fatalf("redis-server not found in PATH and RLPROXY_REQUIRE_REDIS=1: %v", err)
		}
		t.Skipf("skipping: redis-server not found in PATH (install redis-server, or set RLPROXY_REQUIRE_REDIS=1 to fail instead): %v", err)
	}
	s := &Server{t: t, bin: bin}
	t.Cleanup(func() {
		s.mu.Lock()
		if s.client != nil {
			s.client.Close()
			s.client = nil
		}
		s.mu.Unlock()
		s.Stop()
	})
	dir := t.TempDir()
	// A free port can be taken by another process (a parallel test, a
	// package run alongside) before redis-server binds it: that start is
	// retried on a new port, any other failure is not.
	for attempt := 1; ; attempt++ {
		port := strconv.Itoa(netutil.FreePort(t))
		s.Addr = net.JoinHostPort("127.0.0.1", port)
		s.args = append(slices.Clone(leading),
			"--port", port,
			"--bind", "127.0.0.1",
			"--save", "",
			"--appendonly", "no",
			"--dir", dir,
			"--loglevel", "warning",
		)
		s.args = append(s.args, extra...)
		log, exited := s.tryLaunch()
		if !exited {
			return s
		}
		if attempt == maxStartAttempts || !strings.Contains(log, "Address already in use") {
			t.Fatalf("redis-server on %s exited during start:\n%s", s.Addr, log)
		}
	}
}

// maxStartAttempts bounds the ports Start tries when each is taken before
// redis-server binds it.
const maxStartAttempts = 5

// launch starts the process and waits for PING. The caller must not hold mu.
func (s *Server) launch() {
	s.t.Helper()
	if log, exited := s.tryLaunch(); exited {
		s.t.Fatalf("redis-server on %s exited during start:\n%s", s.Addr, log)
	}
}

// tryLaunch starts the process and waits for PING; if the process exits
// first it returns its log and exited true. Other failures fail the test.
// The caller must not hold mu.
func (s *Server) tryLaunch() (log string, exited bool) {
	s.t.Helper()
	cmd := exec.Command(s.bin, s.args...)
	// The log is read only after exited is closed (Wait has finished
	// copying it).
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	proc, err := netutil.Start(cmd) // the exit status of a killed server is expected
	if err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	s.mu.Lock()
	s.proc = proc
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	err = netutil.Poll(ctx, proc.Exited(), netutil.PollInterval, func() error { return ping(s.Addr) })
	switch {
	case errors.Is(err, netutil.ErrExited):
		s.mu.Lock()
		s.proc = nil
		s.mu.Unlock()
		return buf.String(), true
	case err != nil:
		s.t.Fatalf("redis-server on %s did not answer PING within %v", s.Addr, startTimeout)
	}
	return "", false
}

// ping sends a raw RESP PING and expects +PONG, without any client library
// state that could outlive the check.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, netutil.DialTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "+PONG\r\n" {
		return &net.OpError{Op: "ping", Net: "tcp", Err: os.ErrInvalid}
	}
	return nil
}

// Stop kills the server (SIGKILL: an outage, not a shutdown) and waits for
// it to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	proc := s.proc
	s.proc = nil
	s.mu.Unlock()
	if proc != nil {
		proc.Kill()
	}
}

// Restart stops the server if it runs and starts it again on the same port
// with an empty dataset (nothing is persisted), for outage tests.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.launch()
}

// Client returns a valkey-go client connected to the server, shared by all
// callers and closed at cleanup. It reconnects by itself after Restart.
func (s *Server) Client(t testing.TB) valkey.Client {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == nil {
		c, err := valkey.NewClient(valkey.ClientOption{
			InitAddress:       []string{s.Addr},
			ForceSingleClient: true,
			DisableCache:      true,
		})
		if err != nil {
			t.Fatalf("connecting to redis-server %s: %v", s.Addr, err)
		}
		s.client = c
	}
	return s.client
}

// Do runs one raw command, e.g. s.Do(t, "PTTL", key), and returns its
// result; the caller checks the error (a Redis error reply is a result too).
func (s *Server) Do(t testing.TB, args ...string) valkey.ValkeyResult {
	t.Helper()
	c := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	return c.Do(ctx, c.B().Arbitrary(args...).Build())
}

// DebugSleep sends DEBUG SLEEP seconds (the server must run with
// --enable-debug-command yes) and returns once the server is inside it, so a
// test's next command reaches a server known to be busy rather than one that
// may not have read the sleep yet. A sleeping server answers nothing, so
// the sign is taken from the process: its main thread blocked in the
// kernel's nanosleep (/proc/PID/wchan, Linux). The returned channel is
// closed when the sleep's reply arrives. Failures are reported with
// t.Error, so DebugSleep may run on any goroutine.
func (s *Server) DebugSleep(t testing.TB, seconds string) <-chan struct{} {
	t.Helper()
	s.mu.Lock()
	proc := s.proc
	s.mu.Unlock()
	s.Client(t) // connected before the server sleeps
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Do(t, "DEBUG", "SLEEP", seconds).Error(); err != nil {
			t.Errorf("DEBUG SLEEP %s: %v", seconds, err)
		}
	}()
	wchan := fmt.Sprintf("/proc/%d/wchan", proc.Cmd.Process.Pid)
	asleep := func() bool {
		b, err := os.ReadFile(wchan)
		return err == nil && strings.Contains(string(b), "nanosleep")
	}
	if !waitfor.Poll(startTimeout, func() bool {
		select {
		case <-done:
			return true
		default:
			return asleep()
		}
	}) || !asleep() {
		t.Errorf("redis-server on %s: not seen inside DEBUG SLEEP %s (%s)", s.Addr, seconds, wchan)
	}
	return done
}

// Pause stops the server's process (SIGSTOP) and returns once the kernel
// shows it stopped; the returned resume continues it (SIGCONT), and runs
// at cleanup too. A paused server reads nothing, so what clients send
// backs up in their connections for as long as the test decides, not for
// a DEBUG SLEEP's fixed time. Errors fail t.
func (s *Server) Pause(t testing.TB) (resume func()) {
	t.Helper()
	s.mu.Lock()
	proc := s.proc
	s.mu.Unlock()
	if proc == nil {
		t.Fatalf("redis-server on %s: pausing a stopped server", s.Addr)
	}
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("redis-server on %s: SIGSTOP: %v", s.Addr, err)
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			if err := proc.Signal(syscall.SIGCONT); err != nil && !errors.Is(err, os.ErrProcessDone) {
				t.Errorf("redis-server on %s: SIGCONT: %v", s.Addr, err)
			}
		})
	}
	t.Cleanup(resume)
	// /proc/PID/stat's third field is the state: T once stopped (Linux).
	stat := fmt.Sprintf("/proc/%d/stat", proc.Cmd.Process.Pid)
	waitfor.True(t, "redis-server stopped by SIGSTOP", func() bool {
		b, err := os.ReadFile(stat)
		if err != nil {
			return false
		}
		_, after, ok := bytes.Cut(b, []byte(") "))
		return ok && len(after) > 0 && after[0] == 'T'
	})
	return resume
}
