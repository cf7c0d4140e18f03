// Command rlproxy is a rate-limiting reverse proxy.
//
//	rlproxy -config FILE            serve (default config: configs/rlproxy.yaml)
//	rlproxy validate -config FILE   check a file; exit 0, or FILE:LINE: messages and exit 1
//	rlproxy compare [flags]         replay the brief's reference experiment
//	rlproxy health -url URL         probe an admin endpoint (container healthchecks)
//	rlproxy version                 print the version
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"

	"rlproxy/internal/config"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches a subcommand and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "validate":
			return cmdValidate(args[1:], stdout, stderr)
		case "version":
			fmt.Fprintf(stdout, "rlproxy %s (%s)\n", version, runtime.Version())
			return 0
		case "compare":
			return cmdCompare(args[1:], stdout, stderr)
		case "health":
			return cmdHealth(args[1:], stdout, stderr)
		case "serve":
			args = args[1:]
		}
	}
	return cmdServe(args, stderr)
}

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "configs/rlproxy.yaml", "configuration file to check")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if _, err := config.Load(*path); err != nil {
		fmt.Fprintln(stderr, err) // config.Errors: one FILE:LINE: field: message per line
		fmt.Fprintf(stderr, "rlproxy: configuration file %s test failed\n", *path)
		return 1
	}
	fmt.Fprintf(stdout, "rlproxy: configuration file %s test is successful\n", *path)
	return 0
}
