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
// limit_rate_after, which also count per response). Each paced write's
// turn is the previous turn plus the previous write's bytes ÷ rate, so the
// time writes and timers take is absorbed rather than added (a response
// takes its bytes ÷ rate, however loaded the machine); a writer behind its
// schedule — a client that stopped reading — catches up at most
// maxCatchUp's worth, not with a burst of everything it missed (nginx
// allows one second ahead of the rate, too). The turn is awaited before a
// write, never after the last: a streamed event (SSE) is flushed the
// moment its turn comes, not held for the time its own bytes take. Headers and 1xx
// responses are not paced, nor the bytes of a protocol switch (the
// connection is handed over, Unwrap).
//
// Only a route with limit_rate pays for it: one per response there.
type rateWriter struct {
	http.ResponseWriter
	ctx   context.Context // the request's: a client gone ends a wait
	rate  int64           // bytes per second, > 0
	after int64           // bytes sent before pacing starts
	sent  int64           // body bytes written
	due   time.Time       // when the next paced write may start (zero: at once)
}

func newRateWriter(w http.ResponseWriter, ctx context.Context, rate, after int64) *rateWriter {
	return &rateWriter{ResponseWriter: w, ctx: ctx, rate: rate, after: after}
}

// Write implements http.ResponseWriter: the bytes within the allowance at
// once, the rest in pieces, each in its turn.
func (w *rateWriter) Write(p []byte) (int, error) {
	total := 0
	for len(p) > 0 {
		n, paced := len(p), false
		if free := w.after - w.sent; free > 0 {
			n = int(min(int64(n), free))
		} else {
			n, paced = int(min(int64(n), max(w.rate/ratePieces, minRatePiece))), true
			if err := w.await(time.Now()); err != nil {
				return total, err
			}
		}
		m, err := w.ResponseWriter.Write(p[:n])
		total += m
		w.sent += int64(m)
		p = p[m:]
		if paced {
			w.due = nextTurn(w.due, time.Now(), pause(int64(m), w.rate))
		}
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// await waits until the next paced write is due, or the client leaves.
func (w *rateWriter) await(now time.Time) error {
	d := w.due.Sub(now)
	if w.due.IsZero() || d <= 0 {
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

// maxCatchUp bounds how far behind its schedule a paced response may be
// allowed to catch up with writes that do not wait.
const maxCatchUp = time.Second

// nextTurn is the turn after a paced write that took up d at rate: d after
// the previous turn (the first turn is the write's end, now), or after
// now - maxCatchUp when the writer is further behind than that.
func nextTurn(prev, now time.Time, d time.Duration) time.Time {
	if prev.IsZero() {
		prev = now
	}
	if floor := now.Add(-maxCatchUp); prev.Before(floor) {
		prev = floor
	}
	return prev.Add(d)
}

// pause is how long n bytes take at rate bytes per second.
func pause(n, rate int64) time.Duration {
	return time.Duration(float64(n) / float64(rate) * float64(time.Second))
}

// Unwrap lets http.ResponseController reach the server's writer (Flush,
// Hijack, deadlines).
func (w *rateWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
