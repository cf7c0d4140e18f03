package proxy

import (
	"errors"
	"io"
	"net"
	"sync/atomic"

	"rlproxy/internal/h1"
)

// errClientLeft ends an event stream whose client closed its connection.
var errClientLeft = errors.New("client left during the stream")

// streamEvents writes an event stream (text/event-stream without a
// Content-Length) to the client, head already written close-delimited,
// over the hijacked connection: each read of the upstream's body goes
// out at once, and a reader of the client's side notices its close —
// the engine reads nothing while it serves a request, and an event
// stream may be silent for as long as the upstream likes (net/http's
// background read notices it on std). The client gone, the upstream
// connection is closed, which ends the wait for its next event. The
// client connection closes with the stream (bytes it sends meanwhile,
// a pipelined request, are dropped: the close tells it to send again).
// It reports whether the stream ended normally (the upstream's end).
func (n *nativeCall) streamEvents(w *h1.ResponseWriter, u *h1.UpstreamConn, nr *nativeRoute) (bool, error) {
	c, _, err := w.Hijack()
	if err != nil {
		return false, err
	}
	var done, left atomic.Bool
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		var b [512]byte
		for {
			if _, err := c.Read(b[:]); err != nil {
				if !done.Load() {
					left.Store(true)
					_ = u.Conn().Close()
				}
				return
			}
		}
	}()
	ok, err := n.copyEvents(c, u.Body(), nr, &left)
	done.Store(true)
	_ = c.Close()
	<-watched
	if left.Load() {
		n.left, err = true, errClientLeft
	}
	return ok && err == nil, err
}

// copyEvents copies body to c a read at a time.
func (n *nativeCall) copyEvents(c net.Conn, body *h1.Body, nr *nativeRoute, left *atomic.Bool) (bool, error) {
	for {
		k, err := body.Read(n.buf)
		if k > 0 {
			wn, werr := c.Write(n.buf[:k])
			n.rc.bytes += int64(wn)
			if werr != nil {
				n.left = true
				return false, werr
			}
		}
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			if isTimeout(err) && !left.Load() {
				nr.readExpired()
			}
			return false, err
		}
	}
}
