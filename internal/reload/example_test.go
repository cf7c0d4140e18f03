package reload_test

import (
	"context"
	"log/slog"

	"rlproxy/internal/reload"
)

// The shape of rlproxy's serve loop: the callback loads, validates and swaps;
// Extra names the files the running config references.
func ExampleWatcher() {
	var keysFiles []string // from the running config's plans
	w, err := reload.New(reload.Options{
		Path:  "/etc/rlproxy/rlproxy.yaml",
		Extra: func() []string { return keysFiles },
		Reload: func(reason string) {
			slog.Info("reloading config", "reason", reason)
			// cfg, err := config.LoadWith(path, config.LoadOptions{}); on error count a failure and keep
			// the running config; if cfg.Digest is unchanged, do nothing.
		},
	})
	if err != nil {
		slog.Error("watching config", "err", err)
		return
	}
	defer w.Close()
	go w.Run(context.Background())
}
