package server

import (
	"sync"
	"time"

	"rlproxy/internal/admin"
	"rlproxy/internal/proxy"
)

// status is the outcome of the last configuration load, for the admin
// page's overview.
type status struct {
	mu  sync.Mutex
	at  time.Time
	err string // "" when it succeeded
}

// set records a load at now and its error (nil on success).
func (s *status) set(now time.Time, err error) {
	s.mu.Lock()
	s.at, s.err = now, ""
	if err != nil {
		s.err = err.Error()
	}
	s.mu.Unlock()
}

// clearRefusal notes, at now, that the file is again the running
// configuration after a refused reload (restored by hand): the admin page
// must not keep showing the refusal as the last word.
func (s *status) clearRefusal(now time.Time) {
	s.mu.Lock()
	if s.err != "" {
		s.at, s.err = now, ""
	}
	s.mu.Unlock()
}

// pageSource is what the admin page reads from a.
func (a *App) pageSource() admin.PageSource {
	return admin.PageSource{
		Version: a.opts.Version,
		Started: a.proc.started,
		Runtime: func() *proxy.Runtime { return a.srv.Runtime() },
		Live:    a.proc.live,
		Clients: a.srv.ClientDisplay(),
		Status: func() admin.Status {
			a.status.mu.Lock()
			at, err := a.status.at, a.status.err
			a.status.mu.Unlock()
			return admin.Status{LastReload: at, ReloadError: err,
				StoreUp: a.metrics.StoreUp(), BreakerOpen: a.metrics.BreakerOpen()}
		},
	}
}
