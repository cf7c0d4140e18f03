package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"rlproxy/internal/config"
)

// listenFlags are the per-instance values that may be set outside the
// file, so instances on one host can share it: flag > environment > file.
type listenFlags struct {
	fs                  *flag.FlagSet
	listen, adminListen *string
}

// Environment variables that override the file's listeners (docs/reference/cli.md).
const (
	envListen      = "RLPROXY_LISTEN"
	envAdminListen = "RLPROXY_ADMIN_LISTEN"
)

// addListenFlags defines -listen and -admin-listen on fs.
func addListenFlags(fs *flag.FlagSet) *listenFlags {
	return &listenFlags{
		fs:          fs,
		listen:      fs.String("listen", "", `public listener HOST:PORT, "" for none (over `+envListen+` and the file's listen)`),
		adminListen: fs.String("admin-listen", "", `admin listener HOST:PORT, "" for none (over `+envAdminListen+` and the file's admin_listen)`),
	}
}

// overrides returns the values set by flag or environment, after Parse. A
// flag given counts even when empty (-listen "" turns the listener off);
// an empty environment variable counts as unset.
func (f *listenFlags) overrides() config.Overrides {
	given := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	pick := func(name string, v *string, env string) *config.Override {
		if given[name] {
			return &config.Override{Value: *v, Source: "flag -" + name}
		}
		if e := os.Getenv(env); e != "" {
			return &config.Override{Value: e, Source: "environment " + env}
		}
		return nil
	}
	return config.Overrides{
		Listen:      pick("listen", f.listen, envListen),
		AdminListen: pick("admin-listen", f.adminListen, envAdminListen),
	}
}

// printListeners shows the effective listeners and where each came from.
func printListeners(w io.Writer, cfg *config.Config) {
	show := func(v string) string {
		if v == "" {
			return `"" (off)`
		}
		return v
	}
	fmt.Fprintf(w, "rlproxy: listen %s (%s), admin_listen %s (%s)\n",
		show(cfg.Listen), cfg.ListenSource, show(cfg.AdminListen), cfg.AdminListenSource)
}
