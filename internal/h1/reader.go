package h1

import (
	"io"
	"net"
	"time"
)

// reader is one connection's read side: a single buffer reused for every
// head, chunk line and trailer on the connection, so steady-state reading
// allocates nothing. buf[r:w] is read but not consumed.
type reader struct {
	src  net.Conn
	buf  []byte
	r, w int
	max  int // the most buf grows to, bytes
	err  error
	// pin is the end of the live head: buf[:pin] holds the bytes a
	// Request's or Response's strings point into, so nothing is moved or
	// read there until unpin (at the next head).
	pin int

	// idle, when > 0, is the longest one read may wait: before each
	// read the deadline is put between idle and 9/8·idle away (within:
	// body_timeout, the upstream read_timeout). until is the deadline
	// last set through the reader (zero: none). now is the clock
	// (time.Now).
	idle  time.Duration
	until time.Time
	now   func() time.Time
	last  time.Time // the clock's time at the last within
}

// initialBuf is a new reader's buffer size in bytes: most heads fit.
const initialBuf = 4 << 10

func newReader(src net.Conn, max int, now func() time.Time) *reader {
	return &reader{src: src, buf: make([]byte, initialBuf), max: max, now: now}
}

// buffered returns the read, unconsumed bytes.
func (b *reader) buffered() []byte { return b.buf[b.r:b.w] }

// consume drops n buffered bytes.
func (b *reader) consume(n int) {
	b.r += n
	if b.r == b.w {
		b.r, b.w = b.pin, b.pin
	}
}

// consumeHead drops the n bytes of a parsed head and pins them until
// unpin: the head's strings stay valid while its body is read.
func (b *reader) consumeHead(n int) {
	b.pin = b.r + n
	b.consume(n)
}

// unpin releases the previous head's bytes.
func (b *reader) unpin() {
	b.pin = 0
	if b.r == b.w {
		b.r, b.w = 0, 0
	}
}

// fill reads more bytes after the buffered ones, moving them to the
// buffer's start or growing it (up to max) when it is full. It returns
// errFull when the buffered bytes already fill max.
func (b *reader) fill() error {
	if b.err != nil {
		return b.err
	}
	if b.w == len(b.buf) {
		switch {
		case b.r > b.pin:
			b.w = b.pin + copy(b.buf[b.pin:], b.buf[b.r:b.w])
			b.r = b.pin
		case b.w-b.r >= b.max:
			return errFull
		default:
			// A new buffer: a pinned head keeps the old one alive.
			nb := make([]byte, min(2*len(b.buf), b.max+b.pin))
			b.w = copy(nb, b.buf[b.r:b.w])
			b.buf, b.r, b.pin = nb, 0, 0
		}
	}
	n, err := b.read(b.buf[b.w:])
	b.w += n
	if n == 0 && err != nil {
		b.err = err
		return err
	}
	return nil
}

// read reads from the connection, after moving the deadline when idle is
// set: only when less than idle is left, to 9/8 of idle, so a deadline is
// not re-armed on every read.
func (b *reader) read(p []byte) (int, error) {
	if err := b.arm(); err != nil {
		return 0, err
	}
	return b.src.Read(p)
}

// arm moves the deadline as read does before a read.
func (b *reader) arm() error {
	if b.idle > 0 {
		return b.within(b.now(), b.idle)
	}
	return nil
}

// within makes the read deadline between d and d + d/8 from now (the
// clock's time, read by the caller): it moves
// the deadline only when it is outside that span, and then to d + d/8,
// so a connection busy with request after request moves it once per d/8
// instead of at every exchange (a timer change each time). A timeout
// cut by it comes after between d and 9/8·d.
func (b *reader) within(now time.Time, d time.Duration) error {
	b.last = now
	if left := b.until.Sub(now); !b.until.IsZero() && left >= d && left <= d+d/8 {
		return nil
	}
	b.until = now.Add(d + d/8)
	return b.src.SetReadDeadline(b.until)
}

// setDeadline sets a fixed read deadline (read_header_timeout) and stops
// the idle extension until setIdle.
func (b *reader) setDeadline(t time.Time) error {
	b.idle, b.until = 0, t
	return b.src.SetReadDeadline(t)
}

// dueWithin sets a deadline for the whole of what is read next (a
// response head): between d and 9/8·d from now (within), not moved by
// reads until setIdle.
func (b *reader) dueWithin(now time.Time, d time.Duration) error {
	b.idle = 0
	return b.within(now, d)
}

// setIdle makes every read wait at most d, give or take an eighth
// (within; 0: no deadline at all). The deadline set is kept until a read
// finds it outside that span.
func (b *reader) setIdle(d time.Duration) error {
	b.idle = d
	if d == 0 && !b.until.IsZero() {
		b.until = time.Time{}
		return b.src.SetReadDeadline(time.Time{})
	}
	return nil
}

// readAtMost copies up to len(p) bytes, from the buffer first, else one
// read straight from the connection into p.
func (b *reader) readAtMost(p []byte) (int, error) {
	if b.r < b.w {
		n := copy(p, b.buf[b.r:b.w])
		b.consume(n)
		return n, nil
	}
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.read(p)
	if n == 0 && err != nil {
		b.err = err
	}
	return n, err
}

// errFull is fill's error for a buffer at its limit.
var errFull = io.ErrShortBuffer
