package config

import (
	"encoding/json"
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"
)

// schema is one JSON Schema (draft 2020-12) object.
type schema = map[string]any

// Schema returns the JSON Schema (draft 2020-12) of the configuration file,
// generated from the field tables ParseWith decodes with, so the two cannot
// drift. It checks shape: field names, types, choices, bounds, required
// fields, the fields of each algorithm. Rules that need more than one file
// or the environment (references between sections, secrets, files, costs
// against quotas) are ParseWith's alone. The output is indented JSON ending in
// a newline, stable from run to run; docs/rlproxy.schema.json holds it, and
// every example config names that file in its first line
// (`# yaml-language-server: $schema=...`) for editor completion.
func Schema() []byte {
	l := newLoader("schema", LoadOptions{})
	s := objectShape(l.topSection())
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["title"] = "rlproxy configuration"
	s["description"] = "The rlproxy configuration file (docs/reference/config.md)."
	out, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("config: schema: %v", err)) // maps of JSON values: cannot fail
	}
	return append(out, '\n')
}

// objectShape is the schema of a section: its fields (with doc and
// default), no others, the required ones.
func objectShape(s *section) schema {
	props := schema{}
	var required []string
	for _, f := range s.fields {
		var p schema
		switch {
		case f.sub != nil:
			p = objectShape(f.sub)
		default:
			p = copyShape(f.shape())
		}
		if f.doc != "" {
			p["description"] = f.doc
		}
		if f.def != "" {
			var v any
			if err := yaml.Unmarshal([]byte(f.def), &v); err == nil {
				p["default"] = v
			}
		}
		props[f.name] = p
		if f.need != "" && f.needed == nil { // a conditional need is the section's extend's
			required = append(required, f.name)
		}
	}
	out := schema{"type": []any{"object", "null"}, "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		out["type"] = "object"
		out["required"] = required
	}
	if s.extend != nil {
		s.extend(out)
	}
	return out
}

// copyShape copies a shape's top level so a table's shape is never changed
// by adding its doc.
func copyShape(s schema) schema {
	out := schema{}
	for k, v := range s {
		out[k] = v
	}
	return out
}

// stringShape is any string; null is "" (the decoder takes any scalar as
// text: the schema asks for a string, as editors show it).
func stringShape() schema { return schema{"type": []any{"string", "null"}} }

// boolShape is true or false.
func boolShape() schema { return schema{"type": "boolean"} }

// enumShape is one of choices.
func enumShape(choices ...string) schema { return schema{"enum": slices.Clone(choices)} }

// intShape is a whole number in [lo, hi].
func intShape(lo, hi int64) schema {
	return schema{"type": "integer", "minimum": lo, "maximum": hi}
}

// durationShape is a Go duration with a unit ("500ms", "1h30m"); a bare 0
// when zeroOK. Whole milliseconds and the 366-day bound are ParseWith's.
func durationShape(zeroOK bool) schema {
	s := schema{"type": "string", "pattern": `^([0-9]+(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`}
	if zeroOK {
		return schema{"anyOf": []any{s, schema{"const": 0}, schema{"const": "0"}}}
	}
	return s
}

// rateShape is "N r/s" (or r/m, r/h, r/d), N > 0.
func rateShape() schema {
	return schema{"type": "string", "pattern": `^\s*0*[1-9][0-9]*\s*r/[smhd]$`}
}

// listenShape is HOST:PORT, or "" or null (no listener).
func listenShape() schema {
	return schema{"type": []any{"string", "null"}, "pattern": `^$|^(\[[^\]]*\]|[^:\[\]]*):[0-9]{1,5}$`}
}

// addrShape is HOST:PORT.
func addrShape() schema {
	return schema{"type": "string", "pattern": `^(\[[^\]]*\]|[^:\[\]]*):[0-9]{1,5}$`}
}

// envNameShape is the name of an environment variable.
func envNameShape() schema { return schema{"type": "string", "minLength": 1} }

// pathShape is a URL path: it starts with /.
func pathShape() schema { return schema{"type": "string", "pattern": "^/"} }

// listShape is a list of item (null is an empty one); with scalarOK one
// item alone stands for a list of one.
func listShape(item schema, scalarOK bool) schema {
	list := schema{"type": []any{"array", "null"}, "items": item}
	if scalarOK {
		return schema{"anyOf": []any{item, list}}
	}
	return list
}

// namedShape is a mapping of user-chosen names to item; names matches
// pattern when it is not "".
func namedShape(item schema, pattern string) schema {
	s := schema{"type": []any{"object", "null"}, "additionalProperties": item}
	if pattern != "" {
		s["propertyNames"] = schema{"pattern": pattern}
	}
	return s
}
