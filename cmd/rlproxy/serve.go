package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"rlproxy/internal/server"
)

// cmdServe runs the proxy until SIGTERM or SIGINT, then shuts down
// gracefully (shutdown_delay, then in-flight and waiting requests finish;
// signals.go has the signal policy).
func cmdServe(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "configs/rlproxy.yaml", "configuration file")
	lf := addListenFlags(fs)
	maxBytes := maxConfigBytesFlag(fs)
	if !parseFlags(fs, args, stderr) {
		return 2
	}
	// Caught from the start: a SIGHUP before the reload watcher runs, or
	// after it stopped, must not terminate the process.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	app, err := server.New(*path, server.Options{Version: version, Log: stderr, MaxConfigBytes: *maxBytes, Overrides: lf.overrides()})
	if err != nil {
		fmt.Fprintf(stderr, "rlproxy: loading %s:\n", *path)
		printProblems(stderr, err)
		return 1
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go handleSignals(sigs, app.Logger(), stop, func() { os.Exit(forcedExitCode) })
	if err := app.Run(ctx); err != nil {
		fmt.Fprintln(stderr, "rlproxy:", err)
		return 1
	}
	return 0
}
