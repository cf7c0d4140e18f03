package config

import (
	"encoding/binary"
	"maps"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// keysFile reads the plans keys_file named by n (resolved to f) into p.Keys,
// within the loader's size limit. A file in the usual flat form — one
// `credential: plan` per line, plain scalars, comments and blank lines —
// is parsed line by line without building a YAML tree (which costs about
// 20× the file in memory; issue 21 measured 1.1 GB for 50 MB); anything
// else (quotes, flow style, anchors, indentation, CRLF...) goes through
// yaml.v3 as before. Both report the same problems. seen holds the inline
// `keys:` credentials (credential → "FILE:LINE" of its first mention).
func (l *loader) keysFile(n *yaml.Node, field, f string, p *Plans, plans []string, seen map[string]string) {
	data, err := l.readString(f)
	if err != nil {
		l.errorf(n, field, "%q: %v", n.Value, err)
		return
	}
	l.hashString(data)
	p.KeysFile = f
	kd := &decoder{file: f, errs: l.errs}
	if flatKeys(kd, data, p, plans, seen) {
		return
	}
	if root, ok := kd.document([]byte(data)); ok {
		credentials(kd, root, "", p, plans, seen)
	}
}

// hashString adds one file's bytes to the digest as hash does, in pieces:
// converting the whole string to bytes would copy it.
func (l *loader) hashString(s string) {
	l.digest.Write(binary.BigEndian.AppendUint64(nil, uint64(len(s))))
	const chunk = 64 << 10
	for len(s) > 0 {
		k := min(chunk, len(s))
		l.digest.Write([]byte(s[:k]))
		s = s[k:]
	}
}

// flatKeys parses data when every line is blank, a comment, or
// `credential: plan` at column 0 with both plain scalars of safe characters
// (flatLine). It returns false, having changed nothing, when some line is
// not of that form: the caller then parses the file as YAML. Keys and plan
// names are substrings of data or elements of plans: no copy per line.
func flatKeys(d *decoder, data string, p *Plans, plans []string, seen map[string]string) bool {
	count, ok := flatCount(data)
	if !ok {
		return false
	}
	// Sized once: growing a map of a million keys leaves its smaller
	// tables behind as garbage, raising the peak.
	keys := make(map[string]string, len(p.Keys)+count)
	maps.Copy(keys, p.Keys)
	p.Keys = keys
	// Lines of this file's credentials, built only once a credential repeats
	// or fails (a valid file never pays for it): the message names the
	// first mention, and a failed credential is still "listed" (as in the
	// YAML path, where seen is filled before the plan is checked).
	var first map[string]int
	line := 0
	for rest := data; rest != ""; {
		var text string
		text, rest, _ = strings.Cut(rest, "\n")
		line++
		key, val, ok := flatLine(text)
		if !ok {
			continue // blank or comment
		}
		if at, dup := seen[key]; dup {
			d.errorf(&yaml.Node{Line: line}, "", "credential listed twice (first at %s)", at)
			continue
		}
		if first == nil && (p.Keys[key] != "" || !slices.Contains(plans, val)) {
			first = firstLines(data, line)
		}
		if first != nil {
			if at, dup := first[key]; dup {
				d.errorf(&yaml.Node{Line: line}, "", "credential listed twice (first at %s:%d)", d.file, at)
				continue
			}
			first[key] = line
		}
		i := slices.Index(plans, val)
		if i < 0 {
			d.errorf(&yaml.Node{Line: line}, "", "unknown plan %q%s", val, didYouMean(val, plans))
			continue
		}
		p.Keys[key] = plans[i]
	}
	return true
}

// firstLines maps each credential of data's lines before line to the line
// of its first mention.
func firstLines(data string, line int) map[string]int {
	m := map[string]int{}
	for n, rest := 1, data; n < line; n++ {
		var text string
		text, rest, _ = strings.Cut(rest, "\n")
		if key, _, ok := flatLine(text); ok {
			if _, dup := m[key]; !dup {
				m[key] = n
			}
		}
	}
	return m
}

// flatCount reports whether every line of data is blank, a comment or a
// `credential: plan` line (flatLine), so that flatKeys reads it exactly as
// yaml.v3 would, and how many of the latter there are.
func flatCount(data string) (int, bool) {
	n := 0
	for rest := data; rest != ""; {
		var text string
		text, rest, _ = strings.Cut(rest, "\n")
		if _, _, ok := flatLine(text); ok {
			n++
		} else if !blankOrComment(text) {
			return 0, false
		}
	}
	return n, true
}

// blankOrComment reports whether a line is spaces, optionally followed by
// a # comment.
func blankOrComment(text string) bool {
	t := strings.TrimLeft(text, " ")
	return t == "" || t[0] == '#'
}

// flatLine splits `credential: plan` (optionally followed by spaces and a
// `#` comment) where both are plain scalars of safeScalar characters that
// YAML reads as the strings they spell: the credential at column 0, the
// plan not a null.
func flatLine(text string) (key, val string, ok bool) {
	key, rest, found := strings.Cut(text, ": ")
	if !found || !safeScalar(key) {
		return "", "", false
	}
	rest = strings.TrimLeft(rest, " ")
	val, comment, _ := strings.Cut(rest, " ")
	if c := strings.TrimLeft(comment, " "); c != "" && c[0] != '#' {
		return "", "", false
	}
	if !safeScalar(val) || val == "null" || val == "Null" || val == "NULL" || val == "~" {
		return "", "", false
	}
	return key, val, true
}

// safeScalar reports whether s is a non-empty plain scalar that cannot be
// anything but its own text: it starts with a letter, digit or _ and holds
// only those and . - / + = ~ @ $ (no indicator, quote, colon, #, space or
// control character).
func safeScalar(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		case i > 0 && strings.IndexByte(".-/+=~@$", c) >= 0:
		default:
			return false
		}
	}
	return true
}
