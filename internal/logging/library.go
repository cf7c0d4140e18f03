package logging

import (
	"context"
	"log"
	"log/slog"
	"strings"
	"time"
)

// LibraryAttr names, in a record written for a library's ErrorLog, the
// library the line came from.
const LibraryAttr = "library"

// LibraryLinesPerSecond caps the lines a LibraryLog writes per second: a
// failing upstream or a scan of the listener must not flood the log.
const LibraryLinesPerSecond = 10

// LibraryLog returns a *log.Logger for a library's ErrorLog (net/http's
// Server, httputil.ReverseProxy), so that its messages, plain lines of
// text otherwise, are records of l like every other line (JSON with
// log.format json). Each line becomes one record at level, the library's
// text as msg and library=name as an attribute; at most
// LibraryLinesPerSecond a second, the rest counted and reported as
// suppressed=N on the next line logged.
func LibraryLog(l *slog.Logger, level slog.Level, name string) *log.Logger {
	return libraryLog(l, level, name, time.Now)
}

// libraryLog is LibraryLog with the clock that paces the lines.
func libraryLog(l *slog.Logger, level slog.Level, name string, now func() time.Time) *log.Logger {
	w := &libraryWriter{log: l, level: level, name: name, now: now, sampler: NewRefusalSampler(l, LibraryLinesPerSecond)}
	return log.New(w, "", 0)
}

// libraryWriter receives one line per Write from a *log.Logger.
type libraryWriter struct {
	log     *slog.Logger
	level   slog.Level
	name    string
	now     func() time.Time
	sampler *RefusalSampler
}

func (w *libraryWriter) Write(p []byte) (int, error) {
	ctx := context.Background()
	if w.log == nil || !w.log.Enabled(ctx, w.level) {
		return len(p), nil
	}
	ok, n := w.sampler.Allow(w.now())
	if !ok {
		return len(p), nil
	}
	args := []any{slog.String(LibraryAttr, w.name)}
	if n > 0 {
		args = append(args, slog.Uint64(SuppressedKey, n))
	}
	w.log.Log(ctx, w.level, strings.TrimRight(string(p), "\n"), args...)
	return len(p), nil
}
