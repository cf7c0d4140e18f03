package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// AdminToken is one line of admin.token_file: a named bearer token
// (RFC 6750) for the admin listener's control API.
type AdminToken struct {
	// Name is who the audit log says made a change.
	Name string
	// Token is the secret the client sends as "Authorization: Bearer TOKEN".
	Token string
	// Write allows changes; false (scope "read", the default) allows reading only.
	Write bool
}

// minAdminToken is the shortest bearer token accepted, in bytes.
const minAdminToken = 16

// maxTokenFileBytes bounds an admin.token_file: it holds a few lines.
const maxTokenFileBytes = 1 << 20

// ReadTokenFile reads and parses an admin.token_file (ParseTokenFile). The
// control API calls it again whenever the file changes.
func ReadTokenFile(path string) ([]AdminToken, error) {
	var b strings.Builder
	if err := readLimited(path, maxTokenFileBytes, &b); err != nil {
		return nil, fmt.Errorf("admin.token_file: %w", unwrapPathError(err))
	}
	return ParseTokenFile(path, b.String())
}

// ParseTokenFile parses the text of an admin.token_file: one
// `name:token[:read|write]` a line (scope read when absent), blank lines
// and `#` comments ignored. Names follow admin.basic_auth's user rule;
// tokens are at least 16 bytes of printable ASCII without a colon or
// space. A name or token may appear once. The error is an *Errors of
// FILE:LINE: messages, which never repeat a token.
func ParseTokenFile(file, text string) ([]AdminToken, error) {
	errs := &Errors{}
	var toks []AdminToken
	names, secrets := map[string]int{}, map[string]int{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || line[0] == '#' {
			continue
		}
		n := i + 1
		bad := func(format string, args ...any) {
			errs.Problems = append(errs.Problems, Problem{File: file, Line: n, Msg: fmt.Sprintf(format, args...)})
		}
		parts := strings.Split(line, ":")
		if len(parts) < 2 || len(parts) > 3 {
			bad("want name:token or name:token:read|write")
			continue
		}
		t := AdminToken{Name: parts[0], Token: parts[1]}
		switch {
		case !validUser(t.Name):
			bad("name %q: want 1 to 64 printable characters without a colon", t.Name)
		case !validBearer(t.Token):
			bad("token of %q: want at least %d printable ASCII bytes without spaces (the token is not shown)", t.Name, minAdminToken)
		case len(parts) == 3 && parts[2] != "read" && parts[2] != "write":
			bad("scope %q: want read or write", parts[2])
		case names[t.Name] != 0:
			bad("name %q repeats line %d", t.Name, names[t.Name])
		case secrets[t.Token] != 0:
			bad("the token of %q repeats line %d's: each name needs its own", t.Name, secrets[t.Token])
		default:
			t.Write = len(parts) == 3 && parts[2] == "write"
			names[t.Name], secrets[t.Token] = n, n
			toks = append(toks, t)
		}
	}
	if len(errs.Problems) > 0 {
		return nil, errs
	}
	return toks, nil
}

// validBearer reports whether s can be a bearer token here: long enough to
// resist guessing, and of characters a header carries unchanged.
func validBearer(s string) bool {
	if len(s) < minAdminToken {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// tokenFileVal is admin.token_file: a readable file that parses; its
// problems are reported at the token file's own lines.
func (l *loader) tokenFileVal() value {
	return value{stringShape, func(n *yaml.Node, path string) {
		f, ok := l.filePath(n, path, l.dir)
		if !ok {
			return
		}
		if _, err := ReadTokenFile(f); err != nil {
			if ce, ok := err.(*Errors); ok {
				for _, p := range ce.Problems {
					if !l.errs.full() {
						p.Field = path
						l.errs.Problems = append(l.errs.Problems, p)
					}
				}
				return
			}
			l.errorf(n, path, "%v", err)
			return
		}
		l.c.Admin.TokenFile = f
	}}
}

// auditLogVal is admin.audit_log: a file path (relative to the config
// file) whose directory exists; the file is created on the first change.
func (l *loader) auditLogVal() value {
	return value{stringShape, func(n *yaml.Node, path string) {
		s, ok := l.str(n, path)
		if !ok || s == "" {
			return
		}
		if !filepath.IsAbs(s) {
			s = filepath.Join(l.dir, s)
		}
		if fi, err := os.Stat(filepath.Dir(s)); err != nil || !fi.IsDir() {
			l.errorf(n, path, "%q: directory %s does not exist", n.Value, filepath.Dir(s))
			return
		}
		l.c.Admin.AuditLog = s
	}}
}
