package config

import (
	"encoding/binary"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// keysFile reads the plans keys_file named by n (resolved to f) into p.Keys,
// within the loader's size limit. A file in the usual flat form — one
// `credential: plan` per line, plain scalars, comments and blank lines —
// is parsed line by line without building a YAML tree (which costs about
// 20× the file in memory; 1.1 GB was measured for 50 MB); anything
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

// hashString adds one file's bytes to the digest as hash does, through
// one 64 KiB buffer: converting the whole string to bytes would copy it,
// and converting each piece allocates one (a 51 MB file's worth of
// garbage).
func (l *loader) hashString(s string) {
	l.digest.Write(binary.BigEndian.AppendUint64(nil, uint64(len(s))))
	buf := make([]byte, min(64<<10, len(s)))
	for len(s) > 0 {
		k := copy(buf, s)
		l.digest.Write(buf[:k])
		s = s[k:]
	}
}

// flatKeys parses data when every line is blank, a comment, or
// `credential: plan` at column 0 with both plain scalars of safe characters
// (flatLine). It returns false, having changed nothing, when some line is
// not of that form: the caller then parses the file as YAML. Keys are
// substrings of data: no copy per line. A valid file is read once, into a
// slice sized once (growing one of a million leaves its smaller copies
// behind as garbage, raising the peak), and checked for repeats after
// (repeated); a file with a problem is read again by flatChecked, which
// finds and words each problem as the YAML path does.
func flatKeys(d *decoder, data string, p *Plans, plans []string, seen map[string]string) bool {
	count, ok := flatCount(data)
	if !ok {
		return false
	}
	flatAdd(d, flatText{data: data, first: 1}, count, p, plans, seen)
	return true
}

// flatText is text of flat `credential: plan` lines: a keys_file (indent
// 0, from line 1, problems naming no field) or an inline `keys:` block of
// the config file cut out of its YAML (flatBlocks).
type flatText struct {
	data   string
	indent int    // spaces before each credential
	first  int    // the line number of data's first line
	field  string // the field problems name
}

// line splits one line of f as flatLine does, after f's indentation.
func (f flatText) line(text string) (key, val string, ok bool) {
	if f.indent > 0 {
		if len(text) <= f.indent || strings.TrimLeft(text[:f.indent], " ") != "" {
			return "", "", false
		}
		text = text[f.indent:]
	}
	return flatLine(text)
}

// flatAdd adds f's count credentials to p.Keys, or reports f's problems.
func flatAdd(d *decoder, f flatText, count int, p *Plans, plans []string, seen map[string]string) {
	k := p.Keys
	inline := k.Len()
	k.list = slices.Grow(k.list, count)
	if !flatValid(f, k, plans, seen) || repeated(k.list[inline:]) {
		k.list = k.list[:inline]
		flatChecked(d, f, k, plans, seen)
	}
}

// flatValid adds data's credentials to k until a line names an unknown
// plan or a credential of seen (the inline keys), and reports whether none
// did. It does not look for repeats within data.
func flatValid(f flatText, k *Credentials, plans []string, seen map[string]string) bool {
	for rest := f.data; rest != ""; {
		var text string
		text, rest, _ = strings.Cut(rest, "\n")
		key, val, ok := f.line(text)
		if !ok {
			continue // blank or comment
		}
		i := slices.Index(plans, val)
		if _, dup := seen[key]; dup || i < 0 {
			return false
		}
		k.add(key, i, plans)
	}
	return true
}

// flatChecked adds data's credentials to k and reports each problem: a
// credential listed before (inline, or on an earlier line: the message
// names the first mention) and an unknown plan. A credential whose plan
// is unknown is still "listed", as in the YAML path, where seen is filled
// before the plan is checked.
func flatChecked(d *decoder, f flatText, k *Credentials, plans []string, seen map[string]string) {
	first := map[string]int{} // this text's credential → line of its first mention
	line := f.first - 1
	for rest := f.data; rest != "" && !d.errs.full(); {
		var text string
		text, rest, _ = strings.Cut(rest, "\n")
		line++
		key, val, ok := f.line(text)
		if !ok {
			continue // blank or comment
		}
		if at, dup := seen[key]; dup {
			d.errorf(&yaml.Node{Line: line}, f.field, "credential listed twice (first at %s)", at)
			continue
		}
		if at, dup := first[key]; dup {
			d.errorf(&yaml.Node{Line: line}, f.field, "credential listed twice (first at %s:%d)", d.file, at)
			continue
		}
		first[key] = line
		i := slices.Index(plans, val)
		if i < 0 {
			d.errorf(&yaml.Node{Line: line}, f.field, "unknown plan %q%s", val, didYouMean(val, plans))
			continue
		}
		k.add(key, i, plans)
	}
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
