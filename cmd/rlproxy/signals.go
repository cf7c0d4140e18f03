package main

import (
	"log/slog"
	"os"
	"syscall"
)

// forcedExitCode is the exit status after a second SIGINT (128 + SIGINT,
// as shells report an interrupted command).
const forcedExitCode = 130

// handleSignals runs the process's signal policy until sigs is closed
// (docs/reference/operations.md, "Shutdown"): the first SIGTERM or SIGINT calls shutdown,
// which starts the drain; while draining, SIGHUP and further SIGTERMs are
// logged and ignored — never fatal, never a reload — and a second SIGINT
// calls force (exit without draining). Before shutdown SIGHUP belongs to the
// reload watcher and is ignored here; receiving it here too keeps it caught
// for the whole life of the process, so no SIGHUP ever takes the default
// action (terminate), also after the watcher has stopped.
func handleSignals(sigs <-chan os.Signal, log *slog.Logger, shutdown, force func()) {
	draining, interrupts := false, 0
	for sig := range sigs {
		if sig == syscall.SIGINT {
			interrupts++
		}
		switch {
		case !draining && sig == syscall.SIGHUP:
			// The reload watcher's signal.
		case !draining:
			draining = true
			log.Info("received "+signalName(sig)+": shutting down", "signal", signalName(sig))
			shutdown()
		case interrupts >= 2:
			log.Warn("second SIGINT: exiting without draining")
			force()
			return
		default:
			log.Warn("received "+signalName(sig)+" while shutting down: ignored", "signal", signalName(sig))
		}
	}
}

// signalName is the conventional name of the signals handleSignals sees.
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return sig.String()
}
