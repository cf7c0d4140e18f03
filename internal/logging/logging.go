// Package logging builds rlproxy's log/slog logger from the config's log
// section and caps refusal log lines, so a flood of refused requests (an
// attack, a client's retry loop) cannot turn into a flood of log lines.
package logging

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"rlproxy/internal/config"
)

// New returns the process logger: log/slog writing cfg.Format ("json" or
// text) to w, at the level held by level — a *slog.LevelVar the caller may
// Set on reload, so log.level changes take effect without a restart
// (log.format needs one). A nil level uses cfg.Level, fixed.
func New(cfg config.Log, w io.Writer, level *slog.LevelVar) *slog.Logger {
	var lv slog.Leveler = cfg.Level
	if level != nil {
		level.Set(cfg.Level)
		lv = level
	}
	opts := &slog.HandlerOptions{Level: lv}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// SuppressedKey is the attribute that reports how many refusal lines were
// dropped since the previous one that was logged.
const SuppressedKey = "suppressed"

// RefusalSampler caps refusal log lines at a number per wall-clock second
// (a fixed one-second window: at most perSecond lines in any second
// [k s, k+1 s)); the lines over the cap are counted, and the count is
// reported as suppressed=N on the next line that is logged. A count pending
// when refusals stop is reported with the next refusal, whenever it comes.
// It is safe for concurrent use.
type RefusalSampler struct {
	log       *slog.Logger
	perSecond int

	mu         sync.Mutex // guards the fields below
	second     int64      // Unix second of the current window
	logged     int        // lines logged in that second
	suppressed uint64     // lines dropped since the last logged one
}

// NewRefusalSampler returns a sampler logging through log at most perSecond
// refusal lines per second (config.Log.RefusalsPerSecond); perSecond < 1
// logs none.
func NewRefusalSampler(log *slog.Logger, perSecond int) *RefusalSampler {
	return &RefusalSampler{log: log, perSecond: perSecond}
}

// Allow reports whether a refusal at now may be logged and, if so, how many
// were suppressed since the last allowed one (the count is then reset, so
// the caller must report it). A refused call counts itself as suppressed.
func (s *RefusalSampler) Allow(now time.Time) (ok bool, suppressed uint64) {
	sec := now.Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	if sec != s.second {
		s.second, s.logged = sec, 0
	}
	if s.logged >= s.perSecond {
		s.suppressed++
		return false, 0
	}
	s.logged++
	suppressed, s.suppressed = s.suppressed, 0
	return true, suppressed
}

// Log is LogAt at time.Now().
func (s *RefusalSampler) Log(ctx context.Context, msg string, args ...any) {
	s.LogAt(ctx, time.Now(), msg, args...)
}

// LogAt logs msg with args at Info level if Allow(now) permits, adding
// suppressed=N when earlier lines were dropped. args are slog key-value
// pairs or Attrs; a caller whose args are costly to build should call Allow
// first and log itself.
func (s *RefusalSampler) LogAt(ctx context.Context, now time.Time, msg string, args ...any) {
	ok, n := s.Allow(now)
	if !ok {
		return
	}
	if n > 0 {
		args = append(args, slog.Uint64(SuppressedKey, n))
	}
	s.log.InfoContext(ctx, msg, args...)
}
