package server

import (
	"rlproxy/internal/accesslog"
)

// provisionAccessLog gives g the access log its log.access asks for: cur's
// when the section is unchanged, else a new one (none when off). A new log
// that cannot be opened fails the start; on reload the running log stays
// and the reload goes on.
func (a *App) provisionAccessLog(g, cur *generation) error {
	c := g.cfg.Log.Access
	if cur != nil && (cur.access != nil) == c.Enabled && (cur.access == nil || c == cur.accessCfg) {
		a.keepAccessLog(g, cur)
		return nil
	}
	g.accessCfg = c
	if !c.Enabled {
		return nil
	}
	l, err := accesslog.New(c, a.proc.logOut, a.metrics.AccessLogDropped)
	if err != nil {
		if cur == nil {
			return err
		}
		a.log.Error("log.access not changed", "err", err.Error())
		a.keepAccessLog(g, cur)
		return nil
	}
	g.access = newShared(l, func(l *accesslog.Logger) { _ = l.Close() })
	return nil
}

// keepAccessLog makes g share cur's access log.
func (a *App) keepAccessLog(g, cur *generation) {
	g.accessCfg = cur.accessCfg
	if cur.access != nil {
		g.access = cur.access.retain()
	}
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
