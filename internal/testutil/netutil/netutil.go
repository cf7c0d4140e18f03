// Package netutil is the loopback and child-process plumbing shared by the
// harnesses that start real servers for tests (redisserver, nginxtest, the
// deploy test) and by bench/cmd/benchrun: a free loopback port, polling
// until a server is ready, a child process reaped in the background (so any
// goroutine may kill it or wait for its exit), and a buffer safe for exec's
// output-copying goroutine.
//
// The package does not import "testing": the helpers that fail a test take
// the small TB interface (testing.TB satisfies it), so the benchmark program
// can use the rest without linking the test framework.
package netutil

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// DialTimeout bounds one connection attempt of Accepts.
const DialTimeout = 200 * time.Millisecond

// PollInterval is how long WaitListening sleeps between attempts.
const PollInterval = 10 * time.Millisecond

// ErrExited is returned by Poll when the watched process exits before it
// is ready.
var ErrExited = errors.New("process exited")

// TB is the part of testing.TB the helpers use to fail a test.
type TB interface {
	// Helper marks the caller as a helper (see testing.TB).
	Helper()
	// Fatalf logs and ends the test (see testing.TB).
	Fatalf(format string, args ...any)
}

// PickFreeAddr returns "127.0.0.1:PORT" with a port free just now, below
// the kernel's ephemeral range and claimed for this process's lifetime (see
// pick), so neither an outgoing connection nor another picker takes it
// before the caller binds it. The error says why no port was found.
func PickFreeAddr() (string, error) {
	a, err := pick()
	if err != nil {
		return "", err
	}
	return a.String(), nil
}

// FreeAddr is PickFreeAddr for tests: it fails t instead of returning an
// error.
func FreeAddr(t TB) string {
	t.Helper()
	a, err := pick()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return a.String()
}

// FreePort is the port number of FreeAddr.
func FreePort(t TB) int {
	t.Helper()
	a, err := pick()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return a.Port
}

// Accepts reports whether something accepts a TCP connection on addr
// within DialTimeout (nil), else the dial error. The connection is closed
// at once.
func Accepts(addr string) error {
	c, err := net.DialTimeout("tcp", addr, DialTimeout)
	if err != nil {
		return err
	}
	return c.Close()
}

// Poll calls ready every interval until it returns nil (Poll returns nil),
// exited is closed (ErrExited; a nil exited never closes) or ctx ends
// (ctx's error, with ready's last error in the message). ready is called at
// once, before the first sleep.
func Poll(ctx context.Context, exited <-chan struct{}, interval time.Duration, ready func() error) error {
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return ErrExited
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}

// WaitListening fails t unless something accepts TCP connections on addr
// within timeout, polling every PollInterval.
func WaitListening(t TB, addr string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := Poll(ctx, nil, PollInterval, func() error { return Accepts(addr) }); err != nil {
		t.Fatalf("nothing listening on %s within %v: %v", addr, timeout, err)
	}
}

// Process is a started child process that a background goroutine reaps, so
// that any goroutine can wait for its exit (Exited) or kill it (Kill)
// without calling exec.Cmd.Wait twice. Its methods are safe for concurrent
// use.
type Process struct {
	// Cmd is the started command; its ProcessState is set once Exited is
	// closed.
	Cmd *exec.Cmd

	exited chan struct{}
	err    error // Cmd.Wait's result, written before exited is closed
}

// Start starts cmd (see exec.Cmd.Start for the error) and reaps it in the
// background. Output copied by exec (a non-*os.File Stdout/Stderr) is
// complete once Exited is closed.
func Start(cmd *exec.Cmd) (*Process, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{Cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Exited is closed when the process has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err returns exec.Cmd.Wait's result (nil for exit status 0, an
// *exec.ExitError otherwise) once Exited is closed, and nil before.
func (p *Process) Err() error {
	select {
	case <-p.exited:
		return p.err
	default:
		return nil
	}
}

// Signal sends sig to the process; the error is os.Process.Signal's
// (os.ErrProcessDone once it has exited).
func (p *Process) Signal(sig os.Signal) error { return p.Cmd.Process.Signal(sig) }

// Kill sends SIGKILL (an outage, not a shutdown) and waits for the process
// to exit. Killing an exited process does nothing.
func (p *Process) Kill() {
	_ = p.Cmd.Process.Kill() // fails only once the process is done
	<-p.exited
}

// LockedBuffer collects a child's output: exec's copying goroutine writes
// while the test reads. The zero value is ready to use.
type LockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// CleanupTB is TB with Cleanup (see testing.TB), for the helpers that stop
// what they started when the test ends.
type CleanupTB interface {
	TB
	// Cleanup registers f to run when the test ends (see testing.TB).
	Cleanup(f func())
}

// ServeConns serves each connection accepted on a new loopback listener
// with handle, in a goroutine of its own, closing the connection when
// handle returns, until the test ends (the listener closes then). It
// returns the listener's address: a raw upstream or peer for tests that
// need exact bytes on the wire.
func ServeConns(t CleanupTB, handle func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}
