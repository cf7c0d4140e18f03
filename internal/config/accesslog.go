package config

import "path/filepath"

// accessLog decodes `log.access:` (AccessLog) with its defaults: off,
// json, stderr, a buffer of 4096 lines.
func (l *loader) accessLog(log object) {
	a := &l.c.Log.Access
	a.Format, a.Buffer = "json", 4096
	n := log.get("access")
	if n == nil {
		return
	}
	o := l.object(n, log.field("access"), log.keys["access"].Line, "enabled", "format", "path", "buffer")
	a.Enabled = true // a log.access section turns it on unless enabled: false
	if n := o.get("enabled"); n != nil {
		a.Enabled, _ = l.boolean(n, o.field("enabled"))
	}
	if n := o.get("format"); n != nil {
		if s, ok := l.oneOf(n, o.field("format"), "json", "combined"); ok {
			a.Format = s
		}
	}
	if n := o.get("path"); n != nil {
		if s, ok := l.str(n, o.field("path")); ok && s != "" {
			if !filepath.IsAbs(s) { // relative to the config file, as every path
				s = filepath.Join(l.dir, s)
			}
			a.Path = s
		}
	}
	if n := o.get("buffer"); n != nil {
		if v, ok := l.integer(n, o.field("buffer"), 16, 1<<20); ok {
			a.Buffer = int(v)
		}
	}
}
