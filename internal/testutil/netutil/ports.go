package netutil

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The ports pick hands out lie in [pickLow, the ephemeral range's low end).
// The kernel's own pick for port 0 lies in the ephemeral range, which it
// also uses for the local end of every outgoing connection: between the
// pick and the bind, any test's client could take the port (a CI run saw
// pebble's TLS-ALPN port taken so). Below that range only explicit binds
// compete, and the claim file settles those.
const (
	pickLow      = 10000
	pickAttempts = 200
	// portRange is where Linux states the ephemeral range (ip(7)).
	portRange = "/proc/sys/net/ipv4/ip_local_port_range"
	// defaultEphemeralLow is Linux's default low end, used when portRange
	// cannot be read.
	defaultEphemeralLow = 32768
)

// pick returns a loopback address whose port is free now and claimed by
// this process until it exits: an exclusive flock(2) on a file named for
// the port in a shared directory under os.TempDir. Another test process
// (go test runs packages in parallel) or another pick in this one cannot
// claim it while the lock is held, and the kernel releases the lock when
// the process exits, however it exits.
func pick() (*net.TCPAddr, error) {
	dir := filepath.Join(os.TempDir(), "rlproxy-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("finding a free port: %w", err)
	}
	high := ephemeralLow()
	for range pickAttempts {
		port := pickLow + rand.IntN(high-pickLow)
		if !claim(dir, port) {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // something outside the tests listens there; the claim stays, harmlessly
		}
		a := l.Addr().(*net.TCPAddr)
		l.Close()
		return a, nil
	}
	return nil, fmt.Errorf("finding a free port: none of %d random ports in [%d, %d) could be claimed and bound", pickAttempts, pickLow, high)
}

// claim takes the port's lock file in dir without waiting; false if
// another process or an earlier pick in this one holds it. The descriptor
// is a raw one, never closed: an *os.File's finalizer would close it, and
// so release the claim, once garbage collected. O_CLOEXEC keeps the
// servers a test starts from inheriting (and outliving it with) the claim.
func claim(dir string, port int) bool {
	fd, err := syscall.Open(filepath.Join(dir, strconv.Itoa(port)), syscall.O_CREAT|syscall.O_RDWR|syscall.O_CLOEXEC, 0o666)
	if err != nil {
		return false
	}
	if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		syscall.Close(fd)
		return false
	}
	return true
}

// ephemeralLow is the low end of the kernel's ephemeral port range.
func ephemeralLow() int {
	b, err := os.ReadFile(portRange)
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > pickLow+1000 {
				return n
			}
		}
	}
	return defaultEphemeralLow
}
