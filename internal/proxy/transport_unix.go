//go:build unix

package proxy

import (
	"errors"
	"syscall"
)

// idleProbe is what silent needs: the socket, and the read callback made
// once per connection (a closure per call would allocate).
type idleProbe struct {
	raw    syscall.RawConn
	read   func(fd uintptr) bool
	buf    [1]byte
	silent bool
}

// initSilent prepares silent for pc's connection (a *net.TCPConn).
func (pc *directConn) initSilent() {
	sc, ok := pc.conn.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	pc.raw = raw
	pc.read = func(fd uintptr) bool {
		// Go's sockets are non-blocking: EAGAIN is "nothing to read".
		// Data is consumed, but then the connection is dropped anyway.
		_, err := syscall.Read(int(fd), pc.buf[:])
		pc.idleProbe.silent = errors.Is(err, syscall.EAGAIN)
		return true // done: never wait for readiness
	}
}

// silent reports whether the idle connection pc received nothing since its
// last exchange: no stray bytes and no FIN (one non-blocking read, no
// waiting). http.Transport learns the same from the read goroutine it
// keeps on every idle connection.
func (pc *directConn) silent() bool {
	if pc.br.Buffered() > 0 {
		return false
	}
	if pc.raw == nil {
		return true
	}
	pc.idleProbe.silent = false
	if err := pc.raw.Read(pc.read); err != nil {
		return false
	}
	return pc.idleProbe.silent
}
