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

// clientBody is a forwarded request's body. It records a read that failed
// on the client's side — a malformed chunked encoding, a body cut short —
// so the answer is the client's error (400), not the upstream's (502), and
// it enforces server.body_timeout (nginx client_body_timeout) when set:
// before each read of the request body the connection's read deadline moves
// to now + timeout, so a client that trickles its body — or stops sending
// it — is cut off, while a large upload that keeps flowing is not. At EOF
// or Close the deadline is cleared: net/http's background read (which
// notices a client going away) must not time out while the upstream answers.
// After a timeout it stays expired and the answer (408) closes the
// connection, so the server does not wait for the rest of the body.
type clientBody struct {
	io.ReadCloser
	rc       *http.ResponseController
	timeout  time.Duration // 0: no idle bound
	done     atomic.Bool   // EOF, error or Close seen: deadline cleared
	timedOut atomic.Bool   // a read failed at the deadline
	failed   atomic.Bool   // a read failed otherwise (the client's fault)
}

func newClientBody(w http.ResponseWriter, body io.ReadCloser, timeout time.Duration) *clientBody {
	return &clientBody{ReadCloser: body, rc: http.NewResponseController(w), timeout: timeout}
}

func (b *clientBody) Read(p []byte) (int, error) {
	if b.timeout > 0 && !b.done.Load() {
		_ = b.rc.SetReadDeadline(time.Now().Add(b.timeout))
	}
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			// Keep the expired deadline: net/http would otherwise wait
			// for the rest of the body before answering.
			b.timedOut.Store(true)
			b.done.Store(true)
		case err != io.EOF && !errors.Is(err, http.ErrBodyReadAfterClose):
			b.failed.Store(true)
		}
		b.finish()
	}
	return n, err
}

func (b *clientBody) Close() error {
	b.finish()
	return b.ReadCloser.Close()
}

func (b *clientBody) finish() {
	if b.done.CompareAndSwap(false, true) && b.timeout > 0 {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}

// bodyKey finds a request's clientBody from the requests ReverseProxy
// derives from it (their Body is a wrapper, their context ours).
type bodyKey struct{}

// withClientBody returns r with its body watched (and under
// server.body_timeout when timeout > 0). Only requests with a body pay for
// it (a context value).
func withClientBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) *http.Request {
	b := newClientBody(w, r.Body, timeout)
	r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, b))
	r.Body = b
	return r
}

// bodyTimedOut reports whether the body of r (or of the request r was
// derived from) stalled past server.body_timeout: the answer is then 408,
// not an upstream error.
func bodyTimedOut(r *http.Request) bool {
	b, ok := r.Context().Value(bodyKey{}).(*clientBody)
	return ok && b.timedOut.Load()
}

// bodyFailed reports whether reading the client's body of r failed for a
// reason of the client's (RFC 9112 §7.1: a malformed chunked body): the
// answer is then 400.
func bodyFailed(r *http.Request) bool {
	b, ok := r.Context().Value(bodyKey{}).(*clientBody)
	return ok && b.failed.Load()
}
