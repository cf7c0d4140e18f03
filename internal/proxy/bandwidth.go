package proxy

import (
	"context"
	"net/http"
	"time"
)

// ratePieces is how many pieces a second's worth of bytes is written in:
// a paced response goes out in steps of rate/ratePieces bytes (at least
// minRatePiece), so it is smooth at any rate rather than a burst of one
// 32 KiB copy buffer followed by a long pause.
const (
	ratePieces   = 16
	minRatePiece = 512
)

// rateWriter paces one response's body at rate bytes per second once its
// first after bytes have gone out at full speed (nginx limit_rate and
// limit_rate_after, which also count per response). A write waits for
// its turn before it goes out, never after: a streamed event (SSE) is
// flushed the moment its bytes are due, not held for the time its own
// bytes take. Headers and 1xx responses are not paced, nor the bytes of
// a protocol switch (the connection is handed over, Unwrap).
//
// Only a route with limit_rate pays for it: one per response there.
type rateWriter struct {
	http.ResponseWriter
	ctx   context.Context // the request's: a client gone ends a wait
	rate  int64           // bytes per second, > 0
	after int64           // bytes sent before pacing starts
	sent  int64           // body bytes written
	start time.Time       // when pacing started (zero until then)
}

func newRateWriter(w http.ResponseWriter, ctx context.Context, rate, after int64) *rateWriter {
	return &rateWriter{ResponseWriter: w, ctx: ctx, rate: rate, after: after}
}

// Write implements http.ResponseWriter: the bytes within the allowance at
// once, the rest in pieces, each when it is due.
func (w *rateWriter) Write(p []byte) (int, error) {
	total := 0
	for len(p) > 0 {
		n := len(p)
		if free := w.after - w.sent; free > 0 {
			n = int(min(int64(n), free))
		} else {
			n = int(min(int64(n), max(w.rate/ratePieces, minRatePiece)))
			if err := w.await(time.Now()); err != nil {
				return total, err
			}
		}
		m, err := w.ResponseWriter.Write(p[:n])
		total += m
		w.sent += int64(m)
		p = p[m:]
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// await waits until the next paced byte is due, or the client leaves.
func (w *rateWriter) await(now time.Time) error {
	if w.start.IsZero() {
		w.start = now
	}
	d := paceDelay(w.sent-w.after, w.rate, now.Sub(w.start))
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
}

// paceDelay is how long after elapsed (since pacing started) the byte
// following paced bytes is due at rate bytes per second: paced / rate
// seconds after the start, minus the time already gone (≤ 0: now).
func paceDelay(paced, rate int64, elapsed time.Duration) time.Duration {
	return time.Duration(float64(paced)/float64(rate)*float64(time.Second)) - elapsed
}

// Unwrap lets http.ResponseController reach the server's writer (Flush,
// Hijack, deadlines).
func (w *rateWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
