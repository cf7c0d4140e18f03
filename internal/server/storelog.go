package server

import (
	"log/slog"
	"sync/atomic"
	"time"

	"rlproxy/internal/logging"
)

// storeHealthLog writes a WARN line when the store's round trips turn from
// succeeding to failing (the store went down) and back: the log says when
// an outage began and ended, not only the rlproxy_store_up gauge. A store
// that flaps cannot flood the log: the lines are capped as a library's are
// (logging.LibraryLinesPerSecond), the rest counted as suppressed=N.
type storeHealthLog struct {
	log     *slog.Logger
	up      atomic.Bool
	sampler *logging.RefusalSampler
}

func newStoreHealthLog(log *slog.Logger) *storeHealthLog {
	h := &storeHealthLog{log: log, sampler: logging.NewRefusalSampler(log, logging.LibraryLinesPerSecond)}
	h.up.Store(true) // as rlproxy_store_up starts
	return h
}

// record takes one round trip to node; err nil is a success. Only a change
// of state is logged, so a healthy store costs one atomic load per round
// trip.
func (h *storeHealthLog) record(node string, err error) {
	if !h.up.CompareAndSwap(err != nil, err == nil) {
		return
	}
	ok, suppressed := h.sampler.Allow(time.Now())
	if !ok {
		return
	}
	args := []any{slog.String("node", node)}
	if suppressed > 0 {
		args = append(args, slog.Uint64(logging.SuppressedKey, suppressed))
	}
	if err != nil {
		h.log.Warn("store down: a round trip failed; each policy's on_store_error applies", append(args, slog.String("error", err.Error()))...)
		return
	}
	h.log.Warn("store up again: a round trip succeeded", args...)
}
