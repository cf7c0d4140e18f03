package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// builtinHashSecret keys the hash of credential-derived client ids when
// store.key_hash_secret_env is not set. It is public (it is in this source),
// so it only keeps credentials out of plain sight: operators should set
// their own secret (docs/reference/config.md).
const builtinHashSecret = "rlproxy built-in key-hash secret: set store.key_hash_secret_env"

// ParseWith decodes and validates data, the contents of the config file at
// path (path names the file in messages and anchors relative file names:
// TLS files, CA files, plans keys_file, which ParseWith reads from disk, as
// it reads the environment variables the config names), with opts (the
// zero value: no overrides, the default size limit). It returns every
// problem found as an *Errors, sorted by file and line, or the Config. An
// override is checked as the file's value would be; its problems name its
// Source where a file's name the file and line.
func ParseWith(path string, data []byte, opts LoadOptions) (*Config, error) {
	return parse(path, data, opts, true)
}

// parse is ParseWith; with cut, large inline `keys:` mappings are read
// line by line outside the YAML tree (flatBlocks), unless one of them
// turns out not to be a plan's keys: then data is parsed as written.
func parse(path string, data []byte, opts LoadOptions, cut bool) (*Config, error) {
	l := newLoader(path, opts)
	l.hash(data)
	yml := data
	if cut {
		yml, l.blocks = flatBlocks(data)
	}
	if root, ok := l.document(yml); ok {
		line := 0
		if root != nil {
			line = root.Line
		}
		l.decode(root, "", line, l.topSection())
	}
	if !l.blocksUsed() {
		return parse(path, data, opts, false)
	}
	if errs := l.errs; len(errs.Problems) > 0 {
		sortProblems(errs.Problems)
		return nil, errs
	}
	sortProblems(l.c.Warnings)
	l.digest.Sum(l.c.Digest[:0])
	return l.c, nil
}

// Override is a value for one field set outside the file: a command-line
// flag or an environment variable. Overrides serve what differs between
// instances sharing one file (docs/reference/cli.md).
type Override struct {
	Value string
	// Source names where it came from in messages, e.g. "flag -listen".
	Source string
}

// Overrides are the fields set outside the file; nil keeps the file's.
type Overrides struct {
	Listen      *Override // listen
	AdminListen *Override // admin_listen
}

// newLoader starts loading the file at path: a Config holding what no
// field table gives (the maps to fill, the built-in key-hash secret).
func newLoader(path string, opts LoadOptions) *loader {
	return &loader{
		decoder: &decoder{file: path, errs: &Errors{}},
		c: &Config{
			Path:      path,
			Store:     Store{HashSecret: []byte(builtinHashSecret)},
			Upstreams: map[string]*Upstream{},
			Policies:  map[string]*Policy{},
			Plans:     map[string]*Plans{},
		},
		opts:   opts,
		dir:    filepath.Dir(path),
		digest: sha256.New(),
	}
}

// loader fills one Config from the config file (and the files it names).
type loader struct {
	*decoder
	c      *Config
	opts   LoadOptions // overrides and file size limit
	dir    string      // the config file's directory: relative paths start here
	digest hash.Hash   // SHA-256 over the config file and each keys_file
	// blocks are the inline keys mappings read outside the YAML, by the
	// line of their `keys:` (inlinekeys.go).
	blocks map[int]*flatBlock
}

// hash adds one file's bytes to the digest, length first so that file
// boundaries count.
func (l *loader) hash(data []byte) {
	l.digest.Write(binary.BigEndian.AppendUint64(nil, uint64(len(data))))
	l.digest.Write(data)
}

// warnf records a warning: valid, but probably not what the operator wants.
func (l *loader) warnf(n *yaml.Node, field, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	l.c.Warnings = append(l.c.Warnings, Problem{File: l.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// document parses data as exactly one YAML document and returns its root
// (nil for an empty file); ok is false after a syntax error.
func (d *decoder) document(data []byte) (root *yaml.Node, ok bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc, extra yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, true
		}
		d.syntax(err)
		return nil, false
	}
	switch err := dec.Decode(&extra); {
	case err == nil:
		d.errorf(&extra, "", "a second YAML document (---) is not allowed: put everything in one")
		return nil, false
	case !errors.Is(err, io.EOF):
		d.syntax(err)
		return nil, false
	}
	if len(doc.Content) == 0 {
		return nil, true
	}
	return doc.Content[0], true
}

// syntax records a YAML syntax error, taking the line out of yaml.v3's
// "yaml: line N: message" form.
func (d *decoder) syntax(err error) {
	// yaml.v3 v3.0.1 reports parser errors (unlike scanner errors) with a
	// 0-based line ((*parser).fail in decode.go); these are its parser
	// messages (parserc.go), whose line is one too small.
	parserMsgs := []string{"did not find expected ',' or '}'", "did not find expected ',' or ']'",
		"did not find expected key", "did not find expected '-' indicator",
		"did not find expected node content", "did not find expected <document start>",
		"found undefined tag handle", "found duplicate %YAML directive",
		"found incompatible YAML document", "found duplicate %TAG directive"}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, found := strings.CutPrefix(msg, "line "); found {
		if num, m, found := strings.Cut(rest, ": "); found {
			if n, err := strconv.Atoi(num); err == nil {
				line, msg = n, m
				if slices.Contains(parserMsgs, m) {
					line++
				}
			}
		}
	}
	d.errs.Problems = append(d.errs.Problems, Problem{File: d.file, Line: line, Msg: "YAML syntax: " + msg})
}

// samePort reports whether two listen addresses would collide: same port
// and the same host, or either host unspecified (all interfaces).
func samePort(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	wildcard := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return pa == pb && pa != "0" && (ha == hb || wildcard(ha) || wildcard(hb))
}
