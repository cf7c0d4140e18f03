package config

import (
	"errors"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// ParseSource parses one key source as a policy's `key:` spells it (ip,
// global, header:NAME, query:NAME, cookie:NAME, jwt:CLAIM, tls:FIELD); a
// header name is canonicalized, as the policy's is. The error says what
// is wrong with s.
func ParseSource(s string) (Source, error) {
	src, msg := parseSource(s)
	if msg != "" {
		return Source{}, errors.New(msg)
	}
	return src, nil
}

// String spells s as `key:` does: "ip", "global", "header:X-Api-Key".
func (s Source) String() string {
	switch s.Kind {
	case SourceIP:
		return "ip"
	case SourceGlobal:
		return "global"
	}
	var b strings.Builder
	b.WriteString(sourceKindName(s.Kind))
	b.WriteByte(':')
	b.WriteString(s.Name)
	return b.String()
}

// sourceKindName is the prefix of a named source kind.
func sourceKindName(k SourceKind) string {
	switch k {
	case SourceHeader:
		return "header"
	case SourceQuery:
		return "query"
	case SourceCookie:
		return "cookie"
	case SourceJWT:
		return "jwt"
	}
	return "tls"
}

// Control is `control:`: the entries operators set while rlproxy serves
// (package control; the admin API's /api/entries). It is read at start
// only: where the entries live follows store.type at start.
type Control struct {
	// MaxEntries bounds the entries of one policy or plan set, orphans
	// included; 0 (absent): control.DefaultMaxEntries, 100000.
	MaxEntries int
	// StateFile, with the memory store, is the JSON file the entries are
	// kept in across restarts, written atomically (a temporary file renamed
	// over it) on every change; "" keeps them in memory only. Relative
	// paths are resolved against the config file's directory.
	StateFile string
}

// controlSection is `control:`.
func (l *loader) controlSection() *section {
	c := &l.c.Control
	file := value{stringShape, func(n *yaml.Node, path string) {
		s, ok := l.str(n, path)
		switch {
		case !ok:
		case s == "":
			l.errorf(n, path, "want a file path (omit the field to keep entries in memory only)")
		case !filepath.IsAbs(s):
			c.StateFile = filepath.Join(l.dir, s)
		default:
			c.StateFile = s
		}
	}}
	return &section{optional: true, fields: []field{
		{name: "max_entries", def: "100000", value: l.intVal(&c.MaxEntries, 1, 10_000_000),
			doc: "Most entries (bans, exemptions, overrides) one policy or plan set may hold, orphans included; a set beyond it is refused (409)."},
		{name: "state_file", value: file,
			doc: "With the memory store: the file the entries are kept in across restarts (written atomically on every change; relative to this file). Absent: in memory only. With valkey the entries live in the store."},
	}, check: func(o object) {
		if c.StateFile != "" && l.c.Store.Type == "valkey" {
			l.errorf(o.keys["state_file"], o.field("state_file"), "applies to the memory store only: with valkey the entries live in the store")
		}
	}}
}
