package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// idleTimeoutBody enforces server.body_timeout (nginx client_body_timeout):
// before each read of the request body the connection's read deadline moves
// to now + timeout, so a client that trickles its body — or stops sending
// it — is cut off, while a large upload that keeps flowing is not. At EOF
// or Close the deadline is cleared: net/http's background read (which
// notices a client going away) must not time out while the upstream answers.
// After a timeout it stays expired and the answer (408) closes the
// connection, so the server does not wait for the rest of the body.
type idleTimeoutBody struct {
	io.ReadCloser
	rc       *http.ResponseController
	timeout  time.Duration
	done     atomic.Bool // EOF, error or Close seen: deadline cleared
	timedOut atomic.Bool // a read failed at the deadline
}

func newIdleTimeoutBody(w http.ResponseWriter, body io.ReadCloser, timeout time.Duration) *idleTimeoutBody {
	return &idleTimeoutBody{ReadCloser: body, rc: http.NewResponseController(w), timeout: timeout}
}

func (b *idleTimeoutBody) Read(p []byte) (int, error) {
	if !b.done.Load() {
		_ = b.rc.SetReadDeadline(time.Now().Add(b.timeout))
	}
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// Keep the expired deadline: net/http would otherwise wait
			// for the rest of the body before answering.
			b.timedOut.Store(true)
			b.done.Store(true)
		}
		b.finish()
	}
	return n, err
}

func (b *idleTimeoutBody) Close() error {
	b.finish()
	return b.ReadCloser.Close()
}

func (b *idleTimeoutBody) finish() {
	if b.done.CompareAndSwap(false, true) {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}

// bodyKey finds a request's idleTimeoutBody from the requests ReverseProxy
// derives from it (their Body is a wrapper, their context ours).
type bodyKey struct{}

// withIdleTimeoutBody returns r with its body under server.body_timeout.
// Only requests with a body pay for it (a context value).
func withIdleTimeoutBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) *http.Request {
	b := newIdleTimeoutBody(w, r.Body, timeout)
	r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, b))
	r.Body = b
	return r
}

// bodyTimedOut reports whether the body of r (or of the request r was
// derived from) stalled past server.body_timeout: the answer is then 408,
// not an upstream error.
func bodyTimedOut(r *http.Request) bool {
	b, ok := r.Context().Value(bodyKey{}).(*idleTimeoutBody)
	return ok && b.timedOut.Load()
}
