//go:build unix

package h1

import (
	"errors"
	"net"
	"syscall"
)

// IdleProbe tells whether an idle upstream connection received anything
// since its last response, by one non-blocking read of its socket.
// net/http's Transport learns the same from the read goroutine it keeps on
// every idle connection; a probe costs no goroutine. The zero value (or a
// connection that is not a socket) always reports quiet. Not safe for
// concurrent use: one connection, one user at a time.
type IdleProbe struct {
	raw   syscall.RawConn
	read  func(fd uintptr) bool // made once per connection: a closure per call would allocate
	buf   [1]byte
	quiet bool
}

// Init readies p for c's socket.
func (p *IdleProbe) Init(c net.Conn) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	p.raw = raw
	p.read = func(fd uintptr) bool {
		// Go's sockets are non-blocking: EAGAIN is "nothing to read".
		// A byte read here is lost, but the connection is dropped then.
		_, err := syscall.Read(int(fd), p.buf[:])
		p.quiet = errors.Is(err, syscall.EAGAIN)
		return true // done: never wait for readiness
	}
}

// Quiet reports whether the socket holds no stray bytes (a late or extra
// response, a 408 before closing) and no close.
func (p *IdleProbe) Quiet() bool {
	if p.raw == nil {
		return true
	}
	p.quiet = false
	if err := p.raw.Read(p.read); err != nil {
		return false
	}
	return p.quiet
}
