package server

import (
	"time"

	"rlproxy/internal/admin"
	"rlproxy/internal/proxy"
)

// reloadStatus is the outcome of the last configuration load, for the
// admin page's overview.
type reloadStatus struct {
	at  time.Time
	err string // "" when it succeeded
}

// setReloadStatus records a load at now and its error (nil on success).
func (a *App) setReloadStatus(now time.Time, err error) {
	s := reloadStatus{at: now}
	if err != nil {
		s.err = err.Error()
	}
	a.mu.Lock()
	a.reloadStatus = s
	a.mu.Unlock()
}

// clearRefusal notes, at now, that the file is again the running
// configuration after a refused reload (restored by hand): the admin page
// must not keep showing the refusal as the last word.
func (a *App) clearRefusal(now time.Time) {
	a.mu.Lock()
	if a.reloadStatus.err != "" {
		a.reloadStatus = reloadStatus{at: now}
	}
	a.mu.Unlock()
}

// pageSource is what the admin page reads from a.
func (a *App) pageSource() admin.PageSource {
	return admin.PageSource{
		Version: a.opts.Version,
		Started: a.started,
		Runtime: func() *proxy.Runtime { return a.srv.Runtime() },
		Live:    a.live,
		Clients: a.srv.ClientDisplay(),
		Status: func() admin.Status {
			a.mu.Lock()
			rs := a.reloadStatus
			a.mu.Unlock()
			return admin.Status{LastReload: rs.at, ReloadError: rs.err,
				StoreUp: a.metrics.StoreUp(), BreakerOpen: a.metrics.BreakerOpen()}
		},
	}
}
