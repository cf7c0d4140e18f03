//go:build unix

package h1

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// IdleProbe works a connection's socket directly. Quiet tells whether an
// idle upstream connection received anything since its last response, by
// one non-blocking read of its socket: net/http's Transport learns the
// same from the read goroutine it keeps on every idle connection; a probe
// costs no goroutine. Exchange writes and then waits for the answer in
// one wait on the poller. The zero value (or a connection that is not a
// socket) always reports quiet and leaves an exchange to its caller. Not
// safe for concurrent use: one connection, one user at a time.
type IdleProbe struct {
	raw   syscall.RawConn
	read  func(fd uintptr) bool // made once per connection: a closure per call would allocate
	buf   [1]byte
	quiet bool
	x     exchange
}

// exchange is the state of one Exchange: its arguments, how far it got,
// its results.
type exchange struct {
	step    func(fd uintptr) bool // made once per connection, as read
	head    []byte
	into    []byte
	probe   bool
	sent    func() bool // called once the head is out; false: do not wait
	waiting bool        // the head is out: what is left is the answer's wait
	out     int         // bytes of head written
	n       int
	stale   bool
	err     error
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
	p.x.step = p.x.run
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

// Exchange sends head and waits for the first bytes of the answer, read
// into into, in one wait on the runtime's poller: the read is armed before
// the head goes out, so the answer's arrival wakes it. One read is needed
// after the arming (RawRead forgets readiness that came before it), and
// it is made where it is worth most. With probe (an idle upstream
// connection), it is the check for stray bytes or a close (Quiet) before
// the head — stale then, and nothing sent — and the answer, which cannot
// come before the head, is not looked for before the wait: no read is
// spent finding it not there yet (Go's poller waits only after a read
// found nothing). Without, it is made after the head, when the answer may
// already be there. It returns the bytes read (n > 0, or err: io.EOF
// for a close); sent < len(head) with neither means the socket took only
// part of the head without waiting, and the caller writes the rest and
// reads as usual (always so on a connection that is not a socket, as
// TLS). done, when not nil, is called once the whole head is out, before
// the wait: false ends the exchange there with ErrNoWait. The
// connection's read deadline bounds the wait.
func (p *IdleProbe) Exchange(head, into []byte, probe bool, done func() bool) (n, sent int, stale bool, err error) {
	if p.raw == nil {
		return 0, 0, false, nil
	}
	p.x = exchange{step: p.x.step, head: head, into: into, probe: probe, sent: done}
	if rerr := p.raw.Read(p.x.step); rerr != nil && p.x.err == nil && !p.x.stale {
		p.x.err = rerr
	}
	x := &p.x
	n, sent, stale, err = x.n, x.out, x.stale, x.err
	x.head, x.into, x.sent = nil, nil, nil
	return n, sent, stale, err
}

// run is Exchange's step, called by the poller with the socket: first the
// probe and the head, then the answer's read: at once without a probe,
// else woken by readiness. It returns true when done.
func (x *exchange) run(fd uintptr) bool {
	if !x.waiting {
		if x.probe {
			_, err := syscall.Read(int(fd), x.into)
			if err != syscall.EAGAIN {
				x.stale = true
				return true
			}
		}
		for x.out < len(x.head) {
			k, err := syscall.Write(int(fd), x.head[x.out:])
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				return true // the caller writes the rest
			case err != nil:
				x.err = err
				return true
			}
			x.out += k
		}
		x.waiting = true
		if x.sent != nil && !x.sent() {
			x.err = ErrNoWait
			return true
		}
		if x.probe {
			return false
		}
		// Unprobed, the socket was last read before this read was armed
		// (RawRead's reset): bytes or a close that came since (a
		// pipelined request, a half-close during the handler) left no
		// readiness to wake the wait, so one read looks first.
	}
	return x.read(fd)
}

// read is the answer's read: false (wait for readiness) when nothing is
// there yet.
func (x *exchange) read(fd uintptr) bool {
	for {
		k, err := syscall.Read(int(fd), x.into)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return false
		case err != nil:
			x.err = err
		case k == 0:
			x.err = io.EOF
		default:
			x.n = k
		}
		return true
	}
}

// Exchanges reports whether Exchange does its work here (a socket), not
// leaving it all to the caller.
func (p *IdleProbe) Exchanges() bool { return p.raw != nil }

// Gone reports whether the peer closed or reset the connection, by a
// peek (MSG_PEEK) that takes nothing: bytes waiting or none yet both say
// it is still there. It allocates (its callback): it runs on a timer's
// beat, not per request.
func (p *IdleProbe) Gone() bool {
	if p.raw == nil {
		return false
	}
	gone := false
	// Control, not Read: no read deadline applies (the client's may have
	// passed while it waits for its answer) and the poller's readiness
	// is left as it is.
	err := p.raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		gone = err == nil && n == 0 || err != nil && err != syscall.EAGAIN && err != syscall.EINTR
	})
	return gone || err != nil
}
