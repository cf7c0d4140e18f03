package acme

import (
	"context"
	"log/slog"
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapToSlog is a zap logger writing to log: certmagic logs through zap,
// rlproxy through slog, and the CA's problems (in certmagic's error
// fields) belong in the process log.
func zapToSlog(log *slog.Logger) *zap.Logger {
	return zap.New(&slogCore{log: log})
}

// slogCore is a zapcore.Core over a slog.Logger: each entry becomes one
// slog record at the matching level, its fields attributes.
type slogCore struct {
	log    *slog.Logger
	fields []zapcore.Field // from With
}

// slogLevel maps zap's levels to slog's; DPanic and worse are errors.
func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

// Enabled reports whether log records l.
func (c *slogCore) Enabled(l zapcore.Level) bool {
	return c.log.Enabled(context.Background(), slogLevel(l))
}

// With returns a core adding fields to every entry.
func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, fields: append(slices.Clip(c.fields), fields...)}
}

// Check adds c to ce when the entry's level is enabled.
func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

// Write logs one entry with c's fields and its own, in order.
func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields)+1)
	if e.LoggerName != "" {
		attrs = append(attrs, slog.String("logger", e.LoggerName))
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	c.log.LogAttrs(context.Background(), slogLevel(e.Level), "acme: "+e.Message, attrs...)
	return nil
}

// Sync does nothing: slog handlers write at once.
func (c *slogCore) Sync() error { return nil }
