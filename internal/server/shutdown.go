package server

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// drain is the shutdown sequence load balancers expect (docs/reference/operations.md,
// "Shutdown"): /readyz turns 503 at once, reloads stop, and the listener
// keeps accepting and serving for server.shutdown_delay — long enough for
// a balancer's health checks to take the instance out — with each
// HTTP/1.1 response asking its client to close the connection (HTTP/2: a
// GOAWAY), so keep-alive clients move on before the listener closes. Then
// Shutdown closes the listener and drains in-flight and waiting requests
// for server.shutdown_timeout. Signals arriving meanwhile are the caller's
// (cmd/rlproxy logs and ignores them).
func (a *App) drain() error {
	s := a.Config().Server
	a.draining.Store(true)
	a.stopWatching()
	if s.ShutdownDelay > 0 {
		a.log.Info("shutting down: /readyz answers 503; still accepting for shutdown_delay",
			"shutdown_delay", s.ShutdownDelay.String(), "shutdown_timeout", s.ShutdownTimeout.String())
		t := time.NewTimer(s.ShutdownDelay)
		select {
		case <-t.C:
		case err := <-a.ls.served:
			t.Stop()
			return err
		}
	}
	a.log.Info("shutting down: listener closed; draining", "timeout", s.ShutdownTimeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), s.ShutdownTimeout)
	defer cancel()
	return a.Shutdown(ctx)
}

// stopWatching stops the reload watcher (file changes and SIGHUP): a
// configuration swapped in while draining would serve nobody.
func (a *App) stopWatching() {
	if a.ls.stop != nil {
		a.ls.stop()
		_ = a.ls.watcher.Close()
	}
}

// Logger is the process log, for callers that report on the App's behalf
// (cmd/rlproxy's signal handling).
func (a *App) Logger() *slog.Logger { return a.log }

// drainAware marks responses given while draining Connection: close, so
// clients leave this instance before its listener closes. Upgrade requests
// are left alone: their 101 must say Connection: Upgrade.
func (a *App) drainAware(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.draining.Load() && r.Header["Upgrade"] == nil {
			w.Header()["Connection"] = []string{"close"}
		}
		h.ServeHTTP(w, r)
	})
}
