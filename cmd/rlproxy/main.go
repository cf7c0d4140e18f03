// Command rlproxy is a rate-limiting reverse proxy.
//
//	rlproxy -config FILE            serve (default config: configs/rlproxy.yaml)
//	rlproxy validate FILE           check a file; exit 0, or FILE:LINE: messages and exit 1
//	rlproxy schema                  print the config file's JSON Schema
//	rlproxy compare [flags]         replay docs/PRODUCT.md's reference experiment
//	rlproxy health -url URL         probe an admin endpoint (container healthchecks)
//	rlproxy ctl VERB ...            list, ban, exempt, override, delete entries (control API)
//	rlproxy version                 print the version
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"rlproxy/internal/config"
)

// version, commit and date are stamped at build time (GoReleaser,
// .goreleaser.yaml): -ldflags "-X main.version=v1.2.3 -X main.commit=abc1234
// -X main.date=2026-12-01T10:00:00Z". A plain `go build` from a checkout
// leaves them unset; versionLine then reads the commit and its time from
// the VCS stamp Go puts in the binary.
var version, commit, date = "dev", "", ""

// versionLine is what `rlproxy version` prints:
// "rlproxy v1.2.3 (commit abc1234, built 2026-12-01T10:00:00Z, go1.26.8)".
func versionLine() string {
	c, d := commit, date
	if bi, ok := debug.ReadBuildInfo(); ok && (c == "" || d == "") {
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && c == "":
				c = s.Value[:min(len(s.Value), 12)]
			case s.Key == "vcs.time" && d == "":
				d = s.Value
			}
		}
	}
	if c == "" {
		c = "unknown"
	}
	if d == "" {
		d = "unknown"
	}
	return fmt.Sprintf("rlproxy %s (commit %s, built %s, %s)", version, c, d, runtime.Version())
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usage is printed for -h and for a command line rlproxy does not understand.
const usage = `usage:
  rlproxy [serve] -config FILE [-listen ADDR] [-admin-listen ADDR] [-max-config-bytes N]
                                    serve (default configs/rlproxy.yaml); the flags, then
                                    RLPROXY_LISTEN and RLPROXY_ADMIN_LISTEN, override the file;
                                    -max-config-bytes N: largest config or keys_file (default 64 MiB)
  rlproxy validate [-allow-missing-env] [-listen ADDR] [-admin-listen ADDR] [-max-config-bytes N] [-config] FILE
                                    check a file: exit 0, or FILE:LINE: field: message lines and exit 1;
                                    -allow-missing-env: an unset *_env variable is a warning (CI)
  rlproxy schema                    print the config file's JSON Schema (draft 2020-12)
  rlproxy compare [-store memory|valkey] [-valkey ADDR] [-race] [-memory]
  rlproxy health [-url URL]         exit 0 if URL (default http://127.0.0.1:9090/healthz) answers 200
  rlproxy ctl list|ban|exempt|override|delete [-admin URL] [-token-file F] ...
                                    change limits while serving (rlproxy ctl help)
  rlproxy version | --version
`

// run dispatches a subcommand and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "validate":
			return cmdValidate(args[1:], stdout, stderr)
		case "version", "-version", "--version":
			if len(args) > 1 {
				return badArgs(stderr, "version takes no arguments")
			}
			fmt.Fprintln(stdout, versionLine())
			return 0
		case "schema":
			if len(args) > 1 {
				return badArgs(stderr, "schema takes no arguments")
			}
			stdout.Write(config.Schema())
			return 0
		case "compare":
			return cmdCompare(args[1:], stdout, stderr)
		case "health":
			return cmdHealth(args[1:], stdout, stderr)
		case "ctl":
			return cmdCtl(args[1:], stdout, stderr)
		case "serve":
			args = args[1:]
		case "help", "-h", "-help", "--help":
			fmt.Fprint(stdout, usage)
			return 0
		default:
			if !strings.HasPrefix(args[0], "-") {
				return badArgs(stderr, fmt.Sprintf("unknown command %q", args[0]))
			}
		}
	}
	return cmdServe(args, stderr)
}

// badArgs reports a command line rlproxy does not understand (exit 2, as
// the flag package does).
func badArgs(stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "rlproxy: %s\n%s", msg, usage)
	return 2
}

// parseFlags parses args into fs and refuses leftovers: `rlproxy validate
// x.yaml` must not quietly check the default file instead.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) bool {
	if err := fs.Parse(args); err != nil {
		return false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "rlproxy %s: unexpected argument %q (give the file with -config)\n%s", fs.Name(), fs.Arg(0), usage)
		return false
	}
	return true
}

// cmdValidate checks a file as nginx -t does. The file is -config FILE or
// the one argument (`rlproxy validate FILE`), not both.
func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "configs/rlproxy.yaml", "configuration file to check (or give it as the argument)")
	allowMissing := fs.Bool("allow-missing-env", false, "an unset or empty environment variable named by a *_env field is a warning, not an error")
	lf := addListenFlags(fs)
	maxBytes := maxConfigBytesFlag(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// Flags may also follow the file (`rlproxy validate FILE -allow-missing-env`).
	file := ""
	if fs.NArg() > 0 {
		file = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return 2
		}
	}
	switch {
	case fs.NArg() > 0:
		return badArgs(stderr, fmt.Sprintf("validate: one file, not %d", 1+fs.NArg()))
	case file != "" && flagGiven(fs, "config"):
		return badArgs(stderr, fmt.Sprintf("validate: the file is -config %s or the argument %q, not both", *path, file))
	case file != "":
		*path = file
	}
	ov := lf.overrides()
	cfg, err := config.LoadWith(*path, config.LoadOptions{MaxFileBytes: *maxBytes, Overrides: ov, AllowMissingEnv: *allowMissing})
	if err != nil {
		printProblems(stderr, err)
		fmt.Fprintf(stderr, "rlproxy: configuration file %s test failed\n", *path)
		return 1
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(stderr, "%s (warning)\n", w)
	}
	printListeners(stderr, cfg)
	fmt.Fprintf(stdout, "rlproxy: configuration file %s test is successful\n", *path)
	return 0
}

// flagGiven reports whether the command line set flag name (after Parse).
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// maxConfigBytesFlag adds -max-config-bytes to fs: the size limit of the
// config file and each keys_file.
func maxConfigBytesFlag(fs *flag.FlagSet) *int64 {
	return fs.Int64("max-config-bytes", config.DefaultMaxFileBytes, "largest config file or keys_file accepted, in bytes")
}

// printProblems prints a load error: a config.Errors one FILE:LINE: field:
// message per line, written one by one (a file with a million mistakes
// must not become one string of them all).
func printProblems(w io.Writer, err error) {
	var ce *config.Errors
	if !errors.As(err, &ce) {
		fmt.Fprintln(w, err)
		return
	}
	bw := bufio.NewWriter(w)
	for _, p := range ce.Problems {
		bw.WriteString(p.String())
		bw.WriteByte('\n')
	}
	if ce.Stopped {
		fmt.Fprintf(bw, "(stopped after %d problems: the rest of the file was not checked)\n", config.MaxProblems)
	}
	_ = bw.Flush()
}
