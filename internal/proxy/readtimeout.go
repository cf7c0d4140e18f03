package proxy

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// errReadTimeout is the read of an upstream response body that waited
// past its bound (upstreams.NAME.read_timeout, nginx proxy_read_timeout).
var errReadTimeout = errors.New("upstream sent nothing within read_timeout")

// readTimeouts wraps one route's upstream response bodies so that the wait
// between two reads of a body is bounded: upstreams.NAME.read_timeout for
// a plain response, server.stream_idle_timeout for a stream that may
// rightly be quiet (gRPC, text/event-stream). On expiry the body is closed,
// which closes (or resets) its upstream connection and fails the pending
// read; ReverseProxy then aborts the response it already started
// (http.ErrAbortHandler: the client connection is closed) and the request's
// handler returns, releasing its concurrency leases at once.
type readTimeouts struct {
	plain, stream time.Duration // 0 = no bound
	onExpire      func()        // counts and logs one expiry; never nil
	pool          sync.Pool     // *idleBody
}

func newReadTimeouts(plain, stream time.Duration, onExpire func()) *readTimeouts {
	rt := &readTimeouts{plain: plain, stream: stream, onExpire: onExpire}
	rt.pool.New = func() any {
		b := &idleBody{owner: rt}
		b.timer = time.AfterFunc(time.Hour, b.expire)
		b.timer.Stop()
		return b
	}
	return rt
}

// wrap puts resp's body under its bound. A 101 keeps its body (the
// upgraded connection, which ReverseProxy needs writable), as does a
// response without one.
func (rt *readTimeouts) wrap(resp *http.Response) {
	d := rt.plain
	if isStream(resp) {
		d = rt.stream
	}
	if d <= 0 || resp.StatusCode == http.StatusSwitchingProtocols || resp.Body == nil || resp.Body == http.NoBody {
		return
	}
	b := rt.pool.Get().(*idleBody)
	b.ReadCloser, b.timeout = resp.Body, d
	resp.Body = b
}

// isStream reports whether resp is a stream whose pauses are its
// protocol's (a gRPC call, server-sent events), bounded by
// server.stream_idle_timeout rather than read_timeout.
func isStream(resp *http.Response) bool {
	if resp.Request != nil && isGRPC(resp.Request) {
		return true
	}
	ct := resp.Header["Content-Type"]
	return len(ct) > 0 && (strings.HasPrefix(ct[0], "text/event-stream") || strings.HasPrefix(ct[0], "application/grpc"))
}

// idleBody is an upstream response body whose reads are timed: a timer
// armed for each read closes the body when it fires. It is pooled: one
// whose timer never fired goes back to its owner's pool on Close (no
// callback can then be pending), one whose timer fired is left to the GC.
type idleBody struct {
	io.ReadCloser
	owner   *readTimeouts
	timeout time.Duration
	timer   *time.Timer
	fired   bool        // a Read's Stop found the timer fired (Read's goroutine only)
	expired atomic.Bool // the timer's callback closed the body
}

// Read implements io.Reader; a read failed because the timer closed the
// body returns errReadTimeout.
func (b *idleBody) Read(p []byte) (int, error) {
	b.timer.Reset(b.timeout)
	n, err := b.ReadCloser.Read(p)
	if !b.timer.Stop() {
		b.fired = true
	}
	if err != nil && err != io.EOF && b.expired.Load() {
		err = errReadTimeout
	}
	return n, err
}

// expire is the timer's callback: the first expiry counts and closes the
// body, which fails the read it waits in.
func (b *idleBody) expire() {
	if b.expired.CompareAndSwap(false, true) {
		b.owner.onExpire()
		_ = b.ReadCloser.Close()
	}
}

// Close implements io.Closer and returns b to its pool when no timer
// callback can still run.
func (b *idleBody) Close() error {
	b.timer.Stop()
	err := b.ReadCloser.Close()
	if !b.fired {
		b.ReadCloser, b.timeout = nil, 0
		b.owner.pool.Put(b)
	}
	return err
}
