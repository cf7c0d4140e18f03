package config

import (
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// field describes one field of a YAML mapping. It is the one place the
// field's name, default, shape and meaning are written: the known-fields
// list, the decoding, the defaults and the JSON Schema all come from it.
//
// A field decoded by hand-written code (d.object, o.get, o.field and the
// decoder helpers) is an entry with value: checked(shape) and a call in
// its section's check, which receives the section's object.
type field struct {
	name string
	// doc says what the field does, with units; it is the schema's description.
	doc string
	// def is the default as YAML text ("" = none). It is decoded with set
	// before the file's value, so the default and a written value go
	// through the same checks, and it is the schema's default.
	def string
	// need, when set, makes the field required: the message for its
	// absence. A field without set (its section's check decodes it, and
	// reports its absence) states it for the schema alone.
	need string
	// needed, when set, makes need conditional: the field is required
	// only while it returns true.
	needed func() bool
	// value is the shape and decoding of the field's value.
	value
	// sub is the table of a nested mapping, decoded even when absent (so
	// its defaults apply) unless it is optional.
	sub *section
}

// value is how one field's value is checked: its JSON Schema and its
// decoder.
type value struct {
	// shape gives the JSON Schema of the value, on demand: ParseWith never
	// needs it.
	shape func() schema
	// set decodes a present value; nil when the section's check reads the
	// field itself (rules that span fields).
	set func(n *yaml.Node, path string)
}

// section is the table of one mapping's fields.
type section struct {
	fields []field
	// optional sections are off when absent: not decoded, no defaults.
	optional bool
	// pre runs before the fields are decoded, for rules across fields
	// that fields later in the table depend on.
	pre func(o object)
	// check runs after the fields are decoded (even when the mapping was
	// not one: it decides what still applies) for rules across fields.
	check func(o object)
	// extend adds to the section's JSON Schema what the field table cannot
	// say (rules across fields); nil = nothing.
	extend func(s schema)
}

// names lists the section's field names: its known fields.
func (s *section) names() []string {
	names := make([]string, len(s.fields))
	for i, f := range s.fields {
		names[i] = f.name
	}
	return names
}

// decode checks n against s's fields, runs s.pre, applies the fields'
// defaults, decodes the present ones in table order (a nested section
// with its own defaults) and runs s.check. line is where a missing
// field is reported.
func (d *decoder) decode(n *yaml.Node, path string, line int, s *section) {
	o := d.object(n, path, line, s.names()...)
	if s.pre != nil {
		s.pre(o)
	}
	s.applyDefaults(path)
	for _, f := range s.fields {
		v := o.get(f.name)
		switch {
		case f.sub != nil:
			if v != nil || !f.sub.optional {
				d.decode(v, o.field(f.name), keyLine(o, f.name), f.sub)
			}
			continue
		case f.set == nil:
			continue
		}
		if v != nil {
			f.set(v, o.field(f.name))
		} else if f.need != "" && !o.bad && (f.needed == nil || f.needed()) {
			d.errorf(o.missing(), o.field(f.name), "%s", f.need)
		}
	}
	if s.check != nil {
		s.check(o)
	}
}

// applyDefaults decodes the defaults of s's fields (not those of nested
// sections: they apply theirs when decoded).
func (s *section) applyDefaults(path string) {
	for _, f := range s.fields {
		if f.def != "" && f.set != nil {
			f.set(defaultNode(f.def), join(path, f.name))
		}
	}
}

// defaultNode parses a field's default. Defaults are written in this
// package and valid (TestDefaultsDecode), so a failure is a programming
// error. Scalars are built directly (a YAML parser costs kilobytes, and
// every ParseWith decodes every default).
func defaultNode(def string) *yaml.Node {
	if s, err := strconv.Unquote(def); err == nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: yaml.DoubleQuotedStyle, Value: s}
	}
	if !strings.ContainsAny(def, "[]{}'\"#:,") {
		return &yaml.Node{Kind: yaml.ScalarNode, Value: def} // its tag resolved as YAML resolves a plain scalar
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(def), &doc); err != nil || len(doc.Content) == 0 {
		panic("config: bad default " + def)
	}
	return doc.Content[0]
}

// keyLine is the line of field name's key in o, or o's own line when absent.
func keyLine(o object, name string) int {
	if k := o.keys[name]; k != nil {
		return k.Line
	}
	return o.line
}
