package logging_test

import (
	"context"
	"log/slog"
	"os"
	"time"

	"rlproxy/internal/logging"
)

// A cap of 2 refusal lines per second: the third and fourth refusal of
// second 0 are dropped and counted on the first line of second 1.
func ExampleRefusalSampler() {
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // deterministic output
			}
			return a
		},
	}))
	s := logging.NewRefusalSampler(log, 2)
	t0 := time.Unix(1_000_000_000, 0)
	for i, ms := range []int{0, 100, 200, 300, 1000} {
		s.LogAt(context.Background(), t0.Add(time.Duration(ms)*time.Millisecond), "refused", "n", i)
	}
	// Output:
	// level=INFO msg=refused n=0
	// level=INFO msg=refused n=1
	// level=INFO msg=refused n=4 suppressed=2
}
