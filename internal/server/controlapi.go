package server

import (
	"rlproxy/internal/admin"
	"rlproxy/internal/proxy"
)

// controlSource is what the admin listener's control API reads from and
// changes in a (admin.WithControl): the process's Controller, the
// configuration served (its admin section), the change counter.
func (a *App) controlSource() admin.ControlSource {
	return admin.ControlSource{
		Entries: a.proc.ctl,
		Runtime: func() *proxy.Runtime { return a.srv.Runtime() },
		Changed: a.metrics.ControlChange,
	}
}
