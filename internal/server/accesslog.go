package server

import (
	"io"
	"time"

	"rlproxy/internal/accesslog"
	"rlproxy/internal/config"
)

// accessLog is the App's access log state.
type accessLog struct {
	out io.Writer        // "stderr": the process log's writer
	cfg config.AccessLog // of the running log
}

// setAccessLog makes the access log follow cfg's log.access: an
// unchanged section keeps the running log, a changed one opens the new
// log first (on error the running one stays) and closes the old one once
// the requests in flight have had server.shutdown_timeout to end.
func (a *App) setAccessLog(cfg *config.Config) error {
	c := cfg.Log.Access
	if cur := a.srv.AccessLog(); (cur != nil) == c.Enabled && (cur == nil || c == a.access.cfg) {
		return nil
	}
	var l *accesslog.Logger
	if c.Enabled {
		var err error
		if l, err = accesslog.New(c, a.access.out, a.metrics.AccessLogDropped); err != nil {
			return err
		}
	}
	a.access.cfg = c
	if prev := a.srv.SetAccessLog(l); prev != nil {
		time.AfterFunc(cfg.Server.ShutdownTimeout, func() { _ = prev.Close() })
	}
	return nil
}

// reopenAccessLog reopens the access log file (SIGUSR1, after logrotate).
func (a *App) reopenAccessLog() {
	if l := a.srv.AccessLog(); l != nil {
		if err := l.Reopen(); err != nil {
			a.log.Error("reopening the access log", "err", err.Error())
			return
		}
		a.log.Info("access log reopened")
	}
}
