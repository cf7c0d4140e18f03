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
//
// With a limit (max_body_size) it hands out at most limit bytes: the read
// that finds a byte beyond them fails with errBodyTooLarge and cancels the
// upstream request (cancel), so the upstream never receives more than the
// limit, and an answer not yet begun is a 413 (answerError).
type clientBody struct {
	io.ReadCloser
	rc       *http.ResponseController
	timeout  time.Duration // 0: no idle bound
	done     atomic.Bool   // EOF, error or Close seen: deadline cleared
	timedOut atomic.Bool   // a read failed at the deadline
	failed   atomic.Bool   // a read failed otherwise (the client's fault)

	limit    int64 // bytes; 0: none
	read     int64 // bytes read so far (only the reading goroutine touches it)
	tooLarge atomic.Bool
	cancel   context.CancelFunc // ends the upstream request; nil without a limit
}

func newClientBody(w http.ResponseWriter, body io.ReadCloser, timeout time.Duration) *clientBody {
	return &clientBody{ReadCloser: body, rc: http.NewResponseController(w), timeout: timeout}
}

func (b *clientBody) Read(p []byte) (int, error) {
	if b.timeout > 0 && !b.done.Load() {
		_ = b.rc.SetReadDeadline(time.Now().Add(b.timeout))
	}
	if b.limit > 0 {
		return b.readLimited(p)
	}
	return b.check(b.ReadCloser.Read(p))
}

// readLimited reads at most one byte past the limit: finding one, it keeps
// the bytes within the limit, fails with errBodyTooLarge and cancels the
// upstream request.
func (b *clientBody) readLimited(p []byte) (int, error) {
	if b.read > b.limit {
		return 0, errBodyTooLarge
	}
	if rest := b.limit - b.read + 1; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := b.check(b.ReadCloser.Read(p))
	b.read += int64(n)
	if over := b.read - b.limit; over > 0 {
		b.tooLarge.Store(true)
		b.cancel()
		b.finish()
		return n - int(over), errBodyTooLarge
	}
	return n, err
}

// check notes a failed read of the client's body.
func (b *clientBody) check(n int, err error) (int, error) {
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
// server.body_timeout when timeout > 0, at most limit bytes when limit >
// 0). Only requests with a body pay for it (a context value, and a
// cancellable context under a limit).
//
// The exchange is made full duplex (http.ResponseController.EnableFullDuplex):
// the transport may still be reading the body when the upstream's answer
// is already being written, as when an upstream answers before it has read
// the body. Without it, net/http's HTTP/1 server consumes and closes an
// unread body as the response starts: the transport's read of it then
// blocks the answer until the body is complete, or fails ("invalid Read
// on closed Body"), and the transport closes the upstream connection,
// cutting the response being streamed — and the body's bytes that the
// server consumed never reach the upstream.
func withClientBody(w http.ResponseWriter, r *http.Request, timeout time.Duration, limit int64) *http.Request {
	b := newClientBody(w, r.Body, timeout)
	_ = b.rc.EnableFullDuplex() // HTTP/2 is full duplex already (ErrNotSupported)
	ctx := context.WithValue(r.Context(), bodyKey{}, b)
	if limit > 0 {
		b.limit = limit
		ctx, b.cancel = context.WithCancel(ctx)
	}
	r = r.WithContext(ctx)
	r.Body = b
	return r
}

// errBodyTooLarge fails the read that finds a byte past max_body_size.
var errBodyTooLarge = errors.New("request body larger than max_body_size")

// bodyTooLarge reports whether the body of r (or of the request r was
// derived from) grew past its route's max_body_size: the answer is then
// 413, or, once the response has begun, the connection is cut.
func bodyTooLarge(r *http.Request) bool {
	b, ok := r.Context().Value(bodyKey{}).(*clientBody)
	return ok && b.tooLarge.Load()
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

// refuseTooLarge answers a request whose body is over its route's
// max_body_size with 413: for a declared Content-Length before any byte is
// read (no 100 Continue goes out) and before the limiter charges. An
// HTTP/1 connection closes, since the rest of the body is never read; an
// HTTP/2 stream is reset on its own (Connection: close there would send
// GOAWAY for every stream of the connection).
func refuseTooLarge(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		w.Header()["Connection"] = closeConn
	}
	writeProblem(w, r, problemBodyTooLarge, nil, nil)
}

// streamLimit is the limit withClientBody holds r's body to: the route's
// max_body_size for a body without a declared length (chunked, HTTP/2
// without content-length), else none — a declared length within the limit
// is one net/http holds the body to already.
func (up *upstream) streamLimit(r *http.Request) int64 {
	if r.ContentLength >= 0 {
		return 0
	}
	return up.maxBody
}
