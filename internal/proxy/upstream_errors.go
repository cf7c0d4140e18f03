package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"rlproxy/internal/logging"
	upstreampkg "rlproxy/internal/upstream"
)

// How a failed exchange with the upstream is answered and logged: the
// ErrorHandler of every route's ReverseProxy.

// failureLog writes the WARN line of a failed upstream exchange, at most
// logging.LibraryLinesPerSecond a second for a whole configuration (a dead
// upstream under load must not flood the log), the rest counted and
// reported as suppressed=N on the next line.
type failureLog struct {
	log     *slog.Logger
	sampler *logging.RefusalSampler
}

// warn logs msg with args (slog key-value pairs) if the cap allows.
func (f *failureLog) warn(msg string, args ...any) {
	if f == nil || f.log == nil {
		return
	}
	ok, suppressed := f.sampler.Allow(time.Now())
	if !ok {
		return
	}
	f.log.Warn(msg, append(args, logging.SuppressedKey, suppressed)...)
}

// answerError is ReverseProxy's ErrorHandler for upstream u: the client's
// fault (a body over max_body_size, a stalled or malformed one: 413, 408,
// 400; a request the transport refused to send: 400), the client gone (no
// answer), every server of the pool out of rotation (502
// no-healthy-upstream: not 503, which would read as our own outage), an
// upstream timeout (504, as nginx) or another upstream failure (502).
// Whose fault it was is the pool's verdict (upstream.ClientError, which
// also kept it from the server's max_fails).
func answerError(w http.ResponseWriter, r *http.Request, err error, u string, errs errCounters, fails *failureLog) {
	var ce *upstreampkg.ClientError
	client := errors.As(err, &ce)
	switch {
	case bodyTooLarge(r): // over max_body_size (its read cancelled the upstream request)
		refuseTooLarge(w, r)
	case bodyTimedOut(r): // the client stalled (its read also cancelled the context)
		w.Header()["Connection"] = closeConn // the rest of the body never comes
		writeProblem(w, r, problemBodyTimeout, nil, nil)
	case bodyFailed(r) || client && ce.Blame == upstreampkg.BlameClientBody:
		// A malformed or cut body: the client's error, not the upstream's.
		inc(errs.clientBody)
		w.Header()["Connection"] = closeConn // its framing cannot be trusted
		writeProblem(w, r, problemBadRequest, nil, nil)
	case client && ce.Blame == upstreampkg.BlameClientGone,
		errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away: nobody to answer, not the upstream's fault.
	case client: // refused before it was sent
		inc(errs.clientRequest)
		writeProblem(w, r, problemUnsendable, nil, nil)
	case errors.Is(err, upstreampkg.ErrNoHealthy): // every server out of rotation
		inc(errs.upstream)
		writeProblem(w, r, problemNoHealthy, nil, nil)
	case isTimeout(err): // counted as an upstream error too, as documented (502 and 504)
		inc(errs.upstream)
		inc(errs.timeout)
		fails.warn("upstream timeout", "upstream", u, "path", r.URL.Path, "err", err)
		writeProblem(w, r, problemGatewayTimeout, nil, nil)
	default:
		inc(errs.upstream)
		fails.warn("upstream error", "upstream", u, "path", r.URL.Path, "err", err)
		writeProblem(w, r, problemBadGateway, nil, nil)
	}
}

// errClientBody makes ReverseProxy hand a response to ErrorHandler when
// the client's body stalled (server.body_timeout) or was malformed.
var errClientBody = errors.New("request body stalled past server.body_timeout or malformed")
