package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"rlproxy/internal/admin"
	"rlproxy/internal/compare"
)

// cmdHealth probes an admin endpoint and exits 0 when it answers 200: the
// container healthcheck for images without a shell or curl.
func cmdHealth(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:9090/healthz", "admin endpoint to probe")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	if !parseFlags(fs, args, stderr) {
		return 2
	}
	if err := admin.Probe(*url, *timeout); err != nil {
		fmt.Fprintln(stderr, "rlproxy health:", err)
		return 1
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}

// cmdCompare runs docs/PRODUCT.md's reference experiment (docs/CONTRACT.md `rlproxy compare`).
func cmdCompare(args []string, stdout, stderr io.Writer) int {
	return compare.Main(args, stdout, stderr)
}
