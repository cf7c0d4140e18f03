package h1

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"time"
)

// Pool keeps idle keep-alive connections to upstream addresses and dials
// new ones. The zero value of a field means its default. Fields must not
// change once the Pool is used; its methods are safe for concurrent use.
type Pool struct {
	// DialTimeout bounds a dial (upstream connect_timeout); 0 none.
	DialTimeout time.Duration
	// HeaderTimeout bounds the wait for a response head (between it and
	// 9/8 of it: reader.within), from the call
	// to ReadResponse (upstream response_header_timeout); 0: ReadTimeout
	// applies between its reads instead.
	HeaderTimeout time.Duration
	// ReadTimeout bounds each wait for response body bytes, between two
	// reads (upstream read_timeout); 0 none.
	ReadTimeout time.Duration
	// MaxIdle is the most idle connections kept per address; default 32.
	MaxIdle int
	// IdleTimeout closes a connection idle longer, found when it is
	// next taken; 0 keeps idle connections.
	IdleTimeout time.Duration
	// Limits bounds response heads and trailers (1 MiB by default).
	Limits Limits
	// Dial opens a connection; nil uses a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu     sync.Mutex
	idle   map[string][]*UpstreamConn // per address, most recent last
	closed bool
}

func (p *Pool) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
}

// Get returns a connection to addr ("host:port"): the most recently used
// idle one, else a new one. reused tells which. A reused connection is
// probed before its head goes out (WriteHead, ReadResponse): one that
// received stray bytes or a close while idle fails with ErrStale and
// nothing sent, and the request goes on another; one the upstream closes
// just after fails on first use, and an idempotent request may be retried
// on a new one (RFC 9110 §9.2.2).
func (p *Pool) Get(ctx context.Context, addr string) (u *UpstreamConn, reused bool, err error) {
	if u := p.takeIdle(addr); u != nil {
		return u, true, nil
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, false, errClosedPool
	}
	if p.DialTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.DialTimeout)
		defer cancel()
	}
	dial := p.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	u = &UpstreamConn{pool: p, addr: addr, nc: nc,
		rd: newReader(nc, p.Limits.head(), p.now)}
	u.probe.Init(u.nc)
	return u, false, nil
}

// takeIdle pops the most recent idle connection to addr, closing those
// holding unread bytes. One idle past IdleTimeout is found when used
// (idleTooLong), where the clock is read anyway.
func (p *Pool) takeIdle(addr string) *UpstreamConn {
	for {
		p.mu.Lock()
		list := p.idle[addr]
		if len(list) == 0 {
			p.mu.Unlock()
			return nil
		}
		u := list[len(list)-1]
		list[len(list)-1] = nil
		p.idle[addr] = list[:len(list)-1]
		p.mu.Unlock()
		if len(u.rd.buffered()) == 0 {
			u.reused = true
			return u
		}
		u.nc.Close()
	}
}

// put keeps u idle, or closes it beyond MaxIdle.
func (p *Pool) put(u *UpstreamConn) {
	max := p.MaxIdle
	if max <= 0 {
		max = 32
	}
	// The reader read the clock at its last read or response head:
	// close enough to the end of the exchange for an idle timeout.
	u.since = u.rd.last
	p.mu.Lock()
	if p.closed || len(p.idle[u.addr]) >= max {
		p.mu.Unlock()
		u.nc.Close()
		return
	}
	if p.idle == nil {
		p.idle = make(map[string][]*UpstreamConn)
	}
	p.idle[u.addr] = append(p.idle[u.addr], u)
	p.mu.Unlock()
}

// Close closes every idle connection; connections in use close when
// released.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for addr, list := range p.idle {
		for _, u := range list {
			u.nc.Close()
		}
		delete(p.idle, addr)
	}
}

// UpstreamConn is one connection to an upstream, used for one exchange
// at a time: WriteHead, the body (BodyWriter), ReadResponse, the
// response Body, then Release.
type UpstreamConn struct {
	pool  *Pool
	addr  string
	nc    net.Conn
	rd    *reader
	resp  Response
	body  Body
	out   []byte
	since time.Time
	bw    bodyWriter
	probe IdleProbe
	// reused: taken from the idle list, so probed before use. pending:
	// a head without body, sent by ReadResponse with the wait for its
	// answer (IdleProbe.Exchange).
	reused  bool
	pending []byte
	watch   ClientWatch // WatchClient's, for the next ReadResponse
}

// ClientWatch tells whether the client whose request is being answered
// has gone (ResponseWriter implements it).
type ClientWatch interface{ Gone() bool }

// clientCheck is how often a ReadResponse waiting for a head asks its
// ClientWatch whether the client has gone.
const clientCheck = time.Second

// WatchClient makes the next ReadResponse ask c about every second
// (clientCheck) while it waits for the response head, and fail with
// ErrClientGone once c says the client has gone: the wait ends there, as
// nginx ends a request whose client closed its connection (499) instead
// of holding the upstream until response_header_timeout. It applies only
// with a HeaderTimeout longer than the check.
func (u *UpstreamConn) WatchClient(c ClientWatch) { u.watch = c }

// Conn returns the network connection (for a tunnel after a 101).
func (u *UpstreamConn) Conn() net.Conn { return u.nc }

// Buffered returns bytes read past the response head (a tunnel's first
// bytes after a 101), consumed.
func (u *UpstreamConn) Buffered() []byte {
	b := append([]byte(nil), u.rd.buffered()...)
	u.rd.consume(len(b))
	return b
}

// Scratch returns an empty slice to build the request head in.
func (u *UpstreamConn) Scratch() []byte { return u.out[:0] }

// WriteHead sends the request head (AppendRequest) and returns the
// writer for its body, framed as f (Length: the head's Content-Length
// bytes are copied as they are; Chunked: each Write is one chunk, Close
// writes the last chunk and trailer). A head without body (NoBody) needs
// no Close, and goes out with ReadResponse's wait for the answer. On a
// reused connection that received anything while idle, it (or
// ReadResponse) fails with ErrStale, nothing sent.
func (u *UpstreamConn) WriteHead(head []byte, f Framing) (*bodyWriter, error) {
	u.out = head[:0]
	u.bw = bodyWriter{nc: u.nc, chunked: f == Chunked, buf: u.bw.buf}
	if f == NoBody {
		u.pending = head
		return &u.bw, nil
	}
	if u.reused && (u.idleTooLong(u.pool.now()) || !u.probe.Quiet()) {
		return &u.bw, ErrStale
	}
	_, err := u.nc.Write(head)
	return &u.bw, err
}

// send sends the pending head, if any (WriteHead), and reads the first
// bytes of the answer in the same wait (IdleProbe.Exchange), under the
// read deadline ReadResponse has set; now is the clock's time.
func (u *UpstreamConn) send(now time.Time) error {
	head := u.pending
	u.pending = nil
	if u.reused && u.idleTooLong(now) {
		return ErrStale
	}
	if u.rd.idle > 0 {
		if err := u.rd.within(now, u.rd.idle); err != nil {
			return err
		}
	}
	n, sent, stale, err := u.probe.Exchange(head, u.rd.buf[u.rd.w:], u.reused, nil)
	switch {
	case stale:
		return ErrStale
	case err != nil:
		if sent == len(head) { // the wait for the answer failed: a read's error
			u.rd.err = err
		}
		return err
	case n > 0:
		u.rd.w += n
		return nil
	}
	if u.reused && sent == 0 && !u.probe.Quiet() {
		return ErrStale
	}
	_, err = u.nc.Write(head[sent:])
	return err
}

// ReadResponse reads the next response head to a request with method,
// under HeaderTimeout; its body is then read under ReadTimeout. A 1xx head (Status < 200, but 101) is returned as
// it comes: the caller forwards it and calls again for the final one.
// The response's strings are valid until the next call or Release.
func (u *UpstreamConn) ReadResponse(method string) (*Response, error) {
	now := u.pool.now()
	u.rd.last = now
	var due time.Time // the head's own deadline, when the client is watched
	if d := u.pool.HeaderTimeout; d > 0 {
		step := d
		if u.watch != nil && d > clientCheck {
			step, due = clientCheck, now.Add(d)
		}
		u.rd.dueWithin(now, step)
	} else {
		u.rd.setIdle(u.pool.ReadTimeout)
	}
	watch := u.watch
	u.watch = nil
	u.rd.unpin()
	if u.pending != nil {
		err := u.send(now)
		if err != nil && err == u.rd.err {
			err = u.headWait(err, due, watch)
		}
		if err != nil {
			return nil, err
		}
	}
	from := 0
	for {
		n, next, why := scanHead(u.rd.buffered(), from, u.pool.Limits)
		if why != OK {
			return nil, why
		}
		if n > 0 {
			why = u.resp.parse(u.rd.buffered()[:n], method)
			u.rd.consumeHead(n)
			if why != OK {
				return nil, why
			}
			u.body.reset(u.rd, u.resp.Framing, u.resp.Length, u.pool.Limits.head())
			if u.pool.HeaderTimeout > 0 {
				u.rd.setIdle(u.pool.ReadTimeout)
			}
			return &u.resp, nil
		}
		from = next
		if err := u.rd.fill(); err != nil {
			if err == errFull {
				return nil, HeadTooLarge
			}
			if err = u.headWait(err, due, watch); err != nil {
				return nil, err
			}
		}
	}
}

// headWait is ReadResponse's answer to a failed read while it waits for
// a head: with a watched client (due set), a deadline passed before due
// is a check — ErrClientGone when the client has gone, else nil and the
// wait goes on (to the next check, or due). Any other error is returned.
func (u *UpstreamConn) headWait(err error, due time.Time, watch ClientWatch) error {
	if due.IsZero() || !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	if watch.Gone() {
		return ErrClientGone
	}
	now := u.pool.now()
	left := due.Sub(now)
	if left <= 0 {
		return err
	}
	u.rd.err = nil
	return u.rd.dueWithin(now, min(left, clientCheck))
}

// idleTooLong reports whether u waited idle past the pool's IdleTimeout
// before now: it is closed then, as the upstream may be closing it too.
func (u *UpstreamConn) idleTooLong(now time.Time) bool {
	return u.pool.IdleTimeout > 0 && now.Sub(u.since) >= u.pool.IdleTimeout
}

// Body returns the body of the response ReadResponse returned.
func (u *UpstreamConn) Body() *Body { return &u.body }

// Release ends the exchange: the connection goes back to the pool when
// the response was read to its end, neither side asked to close, and no
// byte follows the response; otherwise it is closed. err (the
// exchange's outcome; nil when it went well) closes it too.
func (u *UpstreamConn) Release(err error) {
	if err != nil || u.resp.Close || !u.body.Done() || len(u.rd.buffered()) > 0 ||
		u.resp.Status == 101 || u.resp.Framing == ToClose {
		u.nc.Close()
		return
	}
	u.pool.put(u)
}

// Discard closes the connection without returning it to the pool.
func (u *UpstreamConn) Discard() { u.nc.Close() }

// bodyWriter frames a request body on its way upstream.
type bodyWriter struct {
	nc      net.Conn
	chunked bool
	buf     []byte // a chunk's frame, reused
}

// smallChunk is the largest chunk copied into one write with its frame,
// in bytes; a larger one goes out in three writes.
const smallChunk = 16 << 10

// Write sends p, as one chunk when chunked.
func (w *bodyWriter) Write(p []byte) (int, error) {
	if !w.chunked {
		return w.nc.Write(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	w.buf = append(appendHex(w.buf[:0], len(p)), '\r', '\n')
	if len(p) <= smallChunk {
		w.buf = append(append(w.buf, p...), '\r', '\n')
		if _, err := w.nc.Write(w.buf); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	if _, err := w.nc.Write(w.buf); err != nil {
		return 0, err
	}
	n, err := w.nc.Write(p)
	if err != nil {
		return n, err
	}
	_, err = w.nc.Write(w.buf[len(w.buf)-2:])
	return n, err
}

// Close ends a chunked body with the last chunk and trailer's fields (nil
// for none).
func (w *bodyWriter) Close(trailer *Header) error {
	if !w.chunked {
		return nil
	}
	out := append(w.buf[:0], "0\r\n"...)
	if trailer != nil {
		out = appendTrailer(out, trailer)
	}
	w.buf = append(out, "\r\n"...)
	_, err := w.nc.Write(w.buf)
	return err
}

func appendHex(dst []byte, n int) []byte {
	const digits = "0123456789abcdef"
	var b [16]byte
	i := len(b)
	for {
		i--
		b[i] = digits[n&15]
		n >>= 4
		if n == 0 {
			break
		}
	}
	return append(dst, b[i:]...)
}

// errClosedPool is Get's error after Close.
var errClosedPool = errors.New("h1: pool closed")

// ErrStale is the error of a reused connection that received stray bytes
// or a close while idle, found before anything was sent on it: the
// request may go on another connection whatever its method.
var ErrStale = errors.New("h1: idle upstream connection received bytes or a close")

// ErrClientGone is ReadResponse's error when the watched client has gone
// (WatchClient) before the response head came.
var ErrClientGone = errors.New("h1: the client left before the response head")

// ErrNoWait is IdleProbe.Exchange's error when its done call said not to
// wait for the answer.
var ErrNoWait = errors.New("h1: exchange ended before the wait")
