package main

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestHandleSignals: SIGHUP before shutdown is the watcher's; the first
// SIGTERM starts the drain once; SIGHUP, a second SIGTERM and a first
// SIGINT while draining are logged and ignored; the second SIGINT forces.
func TestHandleSignals(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	sigs := make(chan os.Signal, 8)
	for _, s := range []os.Signal{syscall.SIGHUP, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT, syscall.SIGINT, syscall.SIGTERM} {
		sigs <- s
	}
	close(sigs)
	shutdowns, forced := 0, 0
	handleSignals(sigs, log, func() { shutdowns++ }, func() { forced++ })
	if shutdowns != 1 || forced != 1 {
		t.Errorf("shutdown called %d times, force %d; want 1 and 1", shutdowns, forced)
	}
	want := `level=INFO msg="received SIGTERM: shutting down" signal=SIGTERM
level=WARN msg="received SIGHUP while shutting down: ignored" signal=SIGHUP
level=WARN msg="received SIGTERM while shutting down: ignored" signal=SIGTERM
level=WARN msg="received SIGINT while shutting down: ignored" signal=SIGINT
level=WARN msg="second SIGINT: exiting without draining"
`
	if got := buf.String(); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
	// SIGINT first: the drain, then a second SIGINT forces.
	sigs = make(chan os.Signal, 2)
	sigs <- syscall.SIGINT
	sigs <- syscall.SIGINT
	close(sigs)
	shutdowns, forced = 0, 0
	buf.Reset()
	handleSignals(sigs, log, func() { shutdowns++ }, func() { forced++ })
	if shutdowns != 1 || forced != 1 || !strings.Contains(buf.String(), "received SIGINT: shutting down") {
		t.Errorf("SIGINT twice: shutdown %d, force %d, log %s", shutdowns, forced, buf.String())
	}
}
