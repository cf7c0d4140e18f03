//go:build unix

package h1

import (
	"errors"
	"syscall"
)

// idleProbe is what silent needs: the socket and the read callback,
// made once per connection (a closure per call would allocate).
type idleProbe struct {
	raw    syscall.RawConn
	read   func(fd uintptr) bool
	buf    [1]byte
	silent bool
}

func (u *UpstreamConn) initProbe() {
	sc, ok := u.nc.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	u.probe.raw = raw
	u.probe.read = func(fd uintptr) bool {
		// Go's sockets are non-blocking: EAGAIN is "nothing to read".
		// A byte read here is lost, but the connection is dropped then.
		_, err := syscall.Read(int(fd), u.probe.buf[:])
		u.probe.silent = errors.Is(err, syscall.EAGAIN)
		return true
	}
}

// silent reports whether the idle connection received nothing since its
// last response: no stray bytes (a late or extra response, a 408 before
// closing) and no close — one non-blocking read, no waiting.
func (u *UpstreamConn) silent() bool {
	if len(u.rd.buffered()) > 0 {
		return false
	}
	if u.probe.raw == nil {
		return true
	}
	u.probe.silent = false
	if err := u.probe.raw.Read(u.probe.read); err != nil {
		return false
	}
	return u.probe.silent
}
