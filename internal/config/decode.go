package config

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// decoder walks one file's yaml.Node tree and records problems against it.
// Every helper reports its own problem and returns ok=false, leaving the
// caller's default in place, so one mistake does not cascade into others.
type decoder struct {
	file string
	errs *Errors
	// missingEnvOK, when set, receives the warnings of unset environment
	// variables (LoadOptions.AllowMissingEnv); nil: they are errors.
	missingEnvOK *[]Problem
}

// errorf records a problem at n's line (0 when n is nil).
func (d *decoder) errorf(n *yaml.Node, field, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	if d.errs.full() {
		return
	}
	d.errs.Problems = append(d.errs.Problems, Problem{File: d.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// join appends a field name to a path.
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// index appends a list index to a path.
func index(path string, i int) string {
	return fmt.Sprintf("%s[%d]", path, i)
}

// resolve follows an alias (*anchor) to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// isNull reports whether n is absent or an explicit YAML null (`key:` alone).
func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// object is a YAML mapping whose keys were checked against its known fields.
type object struct {
	path string
	// line is where a missing field is reported: the line of the object's key.
	line int
	keys map[string]*yaml.Node // field name → key node
	vals map[string]*yaml.Node // field name → value node (aliases resolved)
	// bad is set when the node was not a mapping (already reported): the
	// caller skips its required-field checks rather than pile up problems.
	bad bool
}

// get returns the value of field name, or nil when it is absent.
func (o object) get(name string) *yaml.Node { return o.vals[name] }

// has reports whether field name is present (even if null).
func (o object) has(name string) bool { return o.vals[name] != nil }

// field returns the path of field name.
func (o object) field(name string) string { return join(o.path, name) }

// missing returns a node positioned where an absent field of o is reported.
func (o object) missing() *yaml.Node { return &yaml.Node{Line: o.line} }

// object checks that n is a mapping with only known fields (each at most
// once) and returns its fields. A null n is an empty object. YAML merge
// keys (`<<: *defaults`) are honoured: explicit fields win over merged ones.
func (d *decoder) object(n *yaml.Node, path string, line int, known ...string) object {
	o := object{path: path, line: line, keys: map[string]*yaml.Node{}, vals: map[string]*yaml.Node{}}
	n = resolve(n)
	if isNull(n) {
		return o
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want a mapping of fields, not %s", describe(n))
		o.bad = true
		return o
	}
	d.addFields(o, n, known, false, map[*yaml.Node]bool{})
	return o
}

// addFields adds the fields of mapping n to o; merged fields never replace
// explicit ones nor count as duplicates. seen holds the mappings already
// added: merging one again adds nothing, and skipping it keeps a merge cycle
// (`&a {<<: *a}`) from recursing forever and nested merges of one anchor
// (`&x1 {<<: [*x0, *x0]}`, ...) from growing exponentially.
func (d *decoder) addFields(o object, n *yaml.Node, known []string, merged bool, seen map[*yaml.Node]bool) {
	if seen[n] {
		return
	}
	seen[n] = true
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		name := k.Value
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, o.path, "want a field name, not %s", describe(k))
			continue
		}
		if prev, dup := o.keys[name]; dup {
			if !merged {
				d.errorf(k, o.field(name), "duplicate field %q (first at line %d)", name, prev.Line)
			}
			continue
		}
		if !slices.Contains(known, name) && name == "adaptive_concurrency" {
			d.errorf(k, o.field(name), "adaptive_concurrency is an upstream's field (upstreams.NAME.adaptive_concurrency): it bounds what one upstream is sent")
			continue
		}
		if !slices.Contains(known, name) {
			d.errorf(k, o.field(name), "unknown field %q%s", name, didYouMean(name, known))
			continue
		}
		o.keys[name], o.vals[name] = k, resolve(v)
	}
	for _, m := range merges {
		m = resolve(m)
		srcs := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			srcs = m.Content
		}
		for _, s := range srcs {
			if s = resolve(s); s.Kind != yaml.MappingNode {
				d.errorf(s, o.path, "merge key (<<) wants a mapping, not %s", describe(s))
				continue
			}
			d.addFields(o, s, known, true, seen)
		}
	}
}

// entry is one name → value pair of a named map (policies, upstreams, ...).
type entry struct {
	name string
	key  *yaml.Node
	val  *yaml.Node
}

// entries returns the pairs of a mapping of user-chosen names, refusing
// duplicate names.
func (d *decoder) entries(n *yaml.Node, path string) []entry {
	n = resolve(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want a mapping of names, not %s", describe(n))
		return nil
	}
	var out []entry
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			d.errorf(k, path, "want a non-empty name, not %s", describe(k))
			continue
		}
		if line, dup := seen[k.Value]; dup {
			d.errorf(k, join(path, k.Value), "duplicate name %q (first at line %d)", k.Value, line)
			continue
		}
		seen[k.Value] = k.Line
		out = append(out, entry{name: k.Value, key: k, val: resolve(n.Content[i+1])})
	}
	return out
}

// list returns the items of a sequence; a single scalar counts as a
// one-item list when scalarOK (e.g. `key: ip` for `key: [ip]`).
func (d *decoder) list(n *yaml.Node, path string, scalarOK bool) ([]*yaml.Node, bool) {
	n = resolve(n)
	switch {
	case isNull(n):
		return nil, true
	case n.Kind == yaml.SequenceNode:
		items := make([]*yaml.Node, len(n.Content))
		for i, it := range n.Content {
			items[i] = resolve(it)
		}
		return items, true
	case n.Kind == yaml.ScalarNode && scalarOK:
		return []*yaml.Node{n}, true
	}
	d.errorf(n, path, "want a list, not %s", describe(n))
	return nil, false
}

// str decodes a scalar as a string; null is "".
func (d *decoder) str(n *yaml.Node, path string) (string, bool) {
	n = resolve(n)
	if isNull(n) {
		return "", true
	}
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "want a string, not %s", describe(n))
		return "", false
	}
	return n.Value, true
}

// strings decodes a list of strings (or one string when scalarOK).
func (d *decoder) strings(n *yaml.Node, path string, scalarOK bool) ([]*yaml.Node, []string, bool) {
	items, ok := d.list(n, path, scalarOK)
	if !ok {
		return nil, nil, false
	}
	vals := make([]string, len(items))
	for i, it := range items {
		if vals[i], ok = d.str(it, index(path, i)); !ok {
			return nil, nil, false
		}
	}
	return items, vals, true
}

// boolean decodes true/false.
func (d *decoder) boolean(n *yaml.Node, path string) (bool, bool) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		d.errorf(n, path, "%s: want true or false", describe(n))
		return false, false
	}
	return b, true
}

// integer decodes a whole number within [lo, hi].
func (d *decoder) integer(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		d.errorf(n, path, "%s: want a whole number", describe(n))
		return 0, false
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
	if err != nil || v < lo || v > hi {
		d.errorf(n, path, "%s: want a whole number from %d to %d", n.Value, lo, hi)
		return 0, false
	}
	return v, true
}

// maxDuration bounds every duration (windows, leases, timeouts): 366 days.
// A longer one is a typo (24000h for 2400h), never a useful limit.
const maxDuration = 366 * 24 * time.Hour

// duration decodes a Go duration ("500ms", "1h") that is a whole number of
// milliseconds in (0, 366 days]; with zeroOK, 0 is allowed too.
func (d *decoder) duration(n *yaml.Node, path string, zeroOK bool) (time.Duration, bool) {
	s, ok := d.str(n, path)
	if !ok {
		return 0, false
	}
	v, err := time.ParseDuration(s)
	switch {
	case err != nil:
		d.errorf(n, path, "%q: want a duration such as 500ms, 10s, 1h", s)
	case v < 0 && zeroOK:
		d.errorf(n, path, "%q: must not be negative", s)
	case v <= 0 && !zeroOK:
		d.errorf(n, path, "%q: must be greater than 0", s)
	case v > maxDuration:
		d.errorf(n, path, "%q: must be at most 366 days (8784h)", s)
	case v%time.Millisecond != 0:
		d.errorf(n, path, "%q: must be a whole number of milliseconds", s)
	default:
		return v, true
	}
	return 0, false
}

// oneOf decodes a string that must be one of choices (case-sensitive).
func (d *decoder) oneOf(n *yaml.Node, path string, choices ...string) (string, bool) {
	s, ok := d.str(n, path)
	if !ok {
		return "", false
	}
	if !slices.Contains(choices, s) {
		d.errorf(n, path, "%q: want %s%s", s, orList(choices), didYouMean(s, choices))
		return "", false
	}
	return s, true
}

// hostPort checks a listen address "HOST:PORT" (HOST may be empty).
func (d *decoder) hostPort(n *yaml.Node, path string) (string, bool) {
	s, ok := d.str(n, path)
	if !ok {
		return "", false
	}
	if _, port, err := net.SplitHostPort(s); err != nil {
		d.errorf(n, path, "%q: want HOST:PORT, e.g. 127.0.0.1:8080 or :8080", s)
		return "", false
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		d.errorf(n, path, "%q: port must be a number from 0 to 65535", s)
		return "", false
	}
	return s, true
}

// prefixes decodes a list of CIDRs or bare IP addresses (a bare address is
// a /32 or /128). Host bits are masked, as nginx set_real_ip_from does;
// IPv4-mapped IPv6 addresses are unmapped, as client IPs are.
func (d *decoder) prefixes(n *yaml.Node, path string) ([]netip.Prefix, bool) {
	items, vals, ok := d.strings(n, path, false)
	if !ok {
		return nil, false
	}
	var out []netip.Prefix
	for i, s := range vals {
		p, err := parsePrefix(s)
		if err != nil {
			d.errorf(items[i], index(path, i), "%q: want an IP address or CIDR such as 10.0.0.0/8 or 2001:db8::/32", s)
			ok = false
			continue
		}
		out = append(out, p)
	}
	return out, ok
}

// parsePrefix parses a CIDR or a bare IP address.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("zoned address %q", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// filePath resolves a path relative to the config file's directory and checks
// that it can be read; it returns the resolved path.
func (d *decoder) filePath(n *yaml.Node, path, dir string) (string, bool) {
	s, ok := d.str(n, path)
	if !ok {
		return "", false
	}
	if s == "" {
		d.errorf(n, path, "want a file name")
		return "", false
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(dir, s)
	}
	f, err := os.Open(s)
	if err != nil {
		d.errorf(n, path, "%q: %v", n.Value, unwrapPathError(err))
		return "", false
	}
	f.Close()
	return s, true
}

// secretEnv reads a secret from the environment variable named by n. A
// variable that is unset or empty is an error: a secret that silently
// defaults to nothing is worse than a refusal to start.
func (d *decoder) secretEnv(n *yaml.Node, path string, minLen int) (string, bool) {
	name, ok := d.str(n, path)
	if !ok {
		return "", false
	}
	if name == "" {
		d.errorf(n, path, "want the name of an environment variable")
		return "", false
	}
	v, set := os.LookupEnv(name)
	switch {
	case !set || v == "":
		if d.missingEnv(n, path, name, v, set) {
			return strings.Repeat("x", max(minLen, 1)), true
		}
	case len(v) < minLen:
		d.errorf(n, path, "environment variable %s holds %d bytes; want at least %d", name, len(v), minLen)
	default:
		return v, true
	}
	return "", false
}

// missingEnv reports the environment variable name, which field path names,
// as unset (or empty: set): an error, or with LoadOptions.AllowMissingEnv a
// warning, and then true, for the caller to go on with a stand-in value.
func (d *decoder) missingEnv(n *yaml.Node, path, name, v string, set bool) bool {
	state := "is not set"
	if set {
		state = "is empty"
	}
	if d.missingEnvOK == nil {
		d.errorf(n, path, "environment variable %s %s", name, state)
		return false
	}
	*d.missingEnvOK = append(*d.missingEnvOK, Problem{File: d.file, Line: n.Line, Field: path,
		Msg: fmt.Sprintf("environment variable %s %s (allowed: missing variables are warnings)", name, state)})
	return true
}

// unwrapPathError drops the path from an *os.PathError (the message already
// names the file) so "open x: no such file" reads "no such file".
func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// describe shows a node for messages: a scalar's text as written, quoted,
// or its kind.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}

// orList formats choices as "a, b or c".
func orList(choices []string) string {
	if len(choices) == 1 {
		return choices[0]
	}
	return strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
}
