package netutil_test

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rlproxy/internal/testutil/netutil"
)

// TestFreeAddrAndWaitListening: FreeAddr is a bindable loopback address,
// Accepts fails before a listener exists and WaitListening returns once
// one does.
func TestFreeAddrAndWaitListening(t *testing.T) {
	addr := netutil.FreeAddr(t)
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("FreeAddr = %q (%v), want 127.0.0.1:PORT", addr, err)
	}
	if err := netutil.Accepts(addr); err == nil {
		t.Fatalf("Accepts(%s) = nil before anything listens", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("binding the free address: %v", err)
	}
	defer l.Close()
	netutil.WaitListening(t, addr, time.Second)
	if p := netutil.FreePort(t); p <= 0 || strconv.Itoa(p) == port {
		t.Errorf("FreePort = %d while %s is bound", p, port)
	}
}

// TestPoll: ErrExited when the watched channel closes first; the context's
// error, naming ready's last error, on timeout; nil once ready succeeds.
func TestPoll(t *testing.T) {
	exited := make(chan struct{})
	close(exited)
	fail := errors.New("not yet")
	if err := netutil.Poll(context.Background(), exited, time.Millisecond, func() error { return fail }); !errors.Is(err, netutil.ErrExited) {
		t.Errorf("exited: %v, want ErrExited", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	err := netutil.Poll(ctx, nil, time.Millisecond, func() error { return fail })
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not yet") {
		t.Errorf("timeout: %v, want DeadlineExceeded naming %q", err, "not yet")
	}
	n := 0
	if err := netutil.Poll(context.Background(), nil, time.Millisecond, func() error {
		if n++; n < 3 {
			return fail
		}
		return nil
	}); err != nil || n != 3 {
		t.Errorf("ready on the 3rd call: %v after %d calls, want nil after 3", err, n)
	}
}

// TestProcess: Kill ends a running child (twice is harmless) and Err then
// reports the signal; a clean exit has Err nil; LockedBuffer gets the
// output.
func TestProcess(t *testing.T) {
	p, err := netutil.Start(exec.Command("sleep", "30"))
	if err != nil {
		t.Skipf("no sleep binary: %v", err)
	}
	if p.Err() != nil {
		t.Errorf("Err before exit = %v, want nil", p.Err())
	}
	p.Kill()
	p.Kill()
	var ee *exec.ExitError
	if !errors.As(p.Err(), &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("Err after Kill = %v, want killed by SIGKILL", p.Err())
	}

	var out netutil.LockedBuffer
	cmd := exec.Command("echo", "hello")
	cmd.Stdout = &out
	p, err = netutil.Start(cmd)
	if err != nil {
		t.Skipf("no echo binary: %v", err)
	}
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("echo did not exit within 10 s")
	}
	if p.Err() != nil || out.String() != "hello\n" {
		t.Errorf("echo: Err %v, output %q; want nil and %q", p.Err(), out.String(), "hello\n")
	}
}
