package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"rlproxy/internal/server"
)

// cmdServe runs the proxy until SIGTERM or SIGINT, then shuts down
// gracefully (in-flight and waiting requests finish).
func cmdServe(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "configs/rlproxy.yaml", "configuration file")
	lf := addListenFlags(fs)
	if !parseFlags(fs, args, stderr) {
		return 2
	}
	app, err := server.New(*path, server.Options{Version: version, Log: stderr, Overrides: lf.overrides()})
	if err != nil {
		fmt.Fprintf(stderr, "rlproxy: loading %s:\n%v\n", *path, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := app.Run(ctx); err != nil {
		fmt.Fprintln(stderr, "rlproxy:", err)
		return 1
	}
	return 0
}
