package config

import (
	"path/filepath"

	"gopkg.in/yaml.v3"
)

// accessLogSection is `log.access:` (AccessLog). Its defaults apply even
// when it is absent; on, the `log:` section's check, turns the log on when
// `access:` is present, unless it says enabled: false.
func (l *loader) accessLogSection() (s *section, on func(log object)) {
	a := &l.c.Log.Access
	explicit := false // enabled: is written
	path := value{stringShape, func(n *yaml.Node, p string) {
		if s, ok := l.str(n, p); ok && s != "" {
			if !filepath.IsAbs(s) { // relative to the config file, as every path
				s = filepath.Join(l.dir, s)
			}
			a.Path = s
		}
	}}
	on = func(log object) {
		if log.has("access") && !explicit {
			a.Enabled = true
		}
	}
	return &section{fields: []field{
		{name: "enabled", value: l.boolVal(&a.Enabled), doc: "false keeps the section but logs nothing; default true when log.access is present."},
		{name: "format", def: "json", value: l.enumVal(&a.Format, "json", "combined"), doc: "json (one object per line) or combined (nginx/Apache combined)."},
		{name: "path", value: path, doc: "File appended to (relative to this file), reopened on SIGUSR1; default stderr."},
		{name: "buffer", def: "4096", value: l.intVal(&a.Buffer, 16, 1<<20), doc: "Lines queued for the writer; beyond it lines are dropped and counted, never waited for."},
	}, check: func(o object) { explicit = o.has("enabled") }}, on
}
