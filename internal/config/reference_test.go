package config

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// referenceDoc is the operator's configuration reference: one table of
// fields per section.
const referenceDoc = "../../docs/reference/config.md"

// schemaPaths lists every field path of the JSON Schema s: "store.valkey.addrs",
// "upstreams.*.url" (a map's value), "routes[].match.host" (a list's items).
func schemaPaths(s map[string]any, path string, out map[string]bool) {
	if props, ok := s["properties"].(map[string]any); ok {
		for name, sub := range props {
			p := join(path, name)
			out[p] = true
			if m, ok := sub.(map[string]any); ok {
				schemaPaths(m, p, out)
			}
		}
	}
	if m, ok := s["additionalProperties"].(map[string]any); ok {
		schemaPaths(m, path+".*", out)
	}
	if m, ok := s["items"].(map[string]any); ok {
		schemaPaths(m, path+"[]", out)
	}
	for _, k := range []string{"oneOf", "anyOf", "allOf"} {
		list, _ := s[k].([]any)
		for _, sub := range list {
			if m, ok := sub.(map[string]any); ok {
				schemaPaths(m, path, out)
			}
		}
	}
	for _, k := range []string{"if", "then", "else"} {
		if m, ok := s[k].(map[string]any); ok {
			schemaPaths(m, path, out)
		}
	}
}

// docRow is one row of a field table in the reference: the field's full
// path and the row's text.
type docRow struct {
	path, text string
	// def is the row's default cell.
	def  string
	line int
}

var (
	// sectionRE is a section heading: "## `upstreams.NAME`", "## Top level".
	sectionRE = regexp.MustCompile("^## (?:`([^`]+)`|Top level)")
	// tablePrefixRE introduces a table of a nested mapping: "`log.access` fields:".
	tablePrefixRE = regexp.MustCompile("^`([a-z_.]+)` fields:$")
	// rowRE is a table row whose first cell names a field.
	rowRE = regexp.MustCompile("^\\| `([a-z0-9_.\\[\\]]+)` \\|")
	// codeRE is a code span.
	codeRE = regexp.MustCompile("`[^`]*`")
	// wordRE is a field name inside a code span.
	wordRE = regexp.MustCompile(`[a-z0-9_]+`)
)

// sectionPath turns a heading's name into a schema path prefix:
// "upstreams.NAME" → "upstreams.*".
func sectionPath(name string) string {
	return strings.ReplaceAll(name, ".NAME", ".*")
}

// referenceRows reads the field tables of the reference: those whose first
// header cell is "field", under a section heading, or under a line naming
// their mapping ("`log.access` fields:").
func referenceRows(t *testing.T) []docRow {
	t.Helper()
	b, err := os.ReadFile(referenceDoc)
	if err != nil {
		t.Fatal(err)
	}
	var rows []docRow
	section, prefix, inTable, fence := "", "", false, false
	defCol := -1
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if strings.HasPrefix(l, "```") {
			fence = !fence
		}
		switch {
		case fence:
		case sectionRE.MatchString(l):
			section = sectionPath(sectionRE.FindStringSubmatch(l)[1])
			prefix, inTable = section, false
		case tablePrefixRE.MatchString(l):
			prefix = tablePrefixRE.FindStringSubmatch(l)[1]
		case strings.HasPrefix(l, "| field |"):
			inTable = true
			defCol = slices.Index(cells(l), "default")
		case !strings.HasPrefix(l, "|"):
			if inTable {
				prefix = section
			}
			inTable = false
		case inTable && rowRE.MatchString(l):
			r := docRow{path: join(prefix, rowRE.FindStringSubmatch(l)[1]), text: l, line: n}
			if c := cells(l); defCol >= 0 && defCol < len(c) {
				r.def = c[defCol]
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// cells splits a table row into its cells (a cell's own "|" is escaped or
// has no spaces around it).
func cells(row string) []string {
	return strings.Split(strings.Trim(row, "| "), " | ")
}

// TestReferenceMatchesSchema holds the operator's reference and the field
// tables together: every row of the reference's field tables is a field of
// the schema (generated from the tables the loader decodes with) with the
// same default, and every field of the schema has a row, or is named in a
// code span of its parent's row (`health_check`'s `{path, interval, ...}`).
func TestReferenceMatchesSchema(t *testing.T) {
	var s map[string]any
	if err := json.Unmarshal(Schema(), &s); err != nil {
		t.Fatal(err)
	}
	fields := map[string]bool{}
	schemaPaths(s, "", fields)
	defaults := map[string]any{}
	schemaDefaults(s, "", defaults)
	rows := referenceRows(t)
	documented := map[string]string{}
	for _, r := range rows {
		if !fields[r.path] {
			t.Errorf("%s:%d: row %q is no field of the schema", referenceDoc, r.line, r.path)
		}
		documented[r.path] = r.text
		checkDefault(t, r, defaults[r.path])
	}
	var missing []string
	for p := range fields {
		if _, ok := documented[p]; ok || namedInParent(p, documented) || hasRowsUnder(p, documented) {
			continue
		}
		missing = append(missing, p)
	}
	slices.Sort(missing)
	for _, p := range missing {
		t.Errorf("%s: the schema's field %s has no row", referenceDoc, p)
	}
	if len(rows) < 100 {
		t.Errorf("read %d rows from %s, want at least 100: the table format changed?", len(rows), referenceDoc)
	}
}

// hasRowsUnder reports whether a mapping's fields have rows of their own
// ("breaker.failures" for store.breaker).
func hasRowsUnder(p string, documented map[string]string) bool {
	for d := range documented {
		if strings.HasPrefix(d, p+".") {
			return true
		}
	}
	return false
}

// namedInParent reports whether a nested field is named in a code span of
// the row of the nearest documented mapping holding it.
func namedInParent(p string, documented map[string]string) bool {
	name := p[strings.LastIndexAny(p, ".]")+1:]
	for parent := p; ; {
		i := strings.LastIndexAny(parent, ".[")
		if i < 0 {
			return false
		}
		parent = strings.TrimSuffix(parent[:i], ".*")
		text, ok := documented[parent]
		if !ok {
			continue
		}
		for _, span := range codeRE.FindAllString(text, -1) {
			if slices.Contains(wordRE.FindAllString(span, -1), name) {
				return true
			}
		}
		return false
	}
}

// schemaDefaults collects the default of every field of s that has one.
func schemaDefaults(s map[string]any, path string, out map[string]any) {
	if props, ok := s["properties"].(map[string]any); ok {
		for name, sub := range props {
			m, ok := sub.(map[string]any)
			if !ok {
				continue
			}
			if d, ok := m["default"]; ok {
				out[join(path, name)] = d
			}
			schemaDefaults(m, join(path, name), out)
		}
	}
	if m, ok := s["additionalProperties"].(map[string]any); ok {
		schemaDefaults(m, path+".*", out)
	}
	if m, ok := s["items"].(map[string]any); ok {
		schemaDefaults(m, path+"[]", out)
	}
}

// checkDefault wants the first code span of a row's default cell to be the
// field's default in the schema (the field table's), durations compared as
// durations ("60s" is "1m0s").
func checkDefault(t *testing.T, r docRow, want any) {
	t.Helper()
	if want == nil {
		return
	}
	span := strings.Trim(codeRE.FindString(r.def), "`")
	var got any
	if err := yaml.Unmarshal([]byte(span), &got); err != nil || span == "" {
		t.Errorf("%s:%d: %s: default cell %q, want `%v`", referenceDoc, r.line, r.path, r.def, want)
		return
	}
	if g, w := jsonText(got), jsonText(want); g != w {
		dg, errG := time.ParseDuration(strings.Trim(g, `"`))
		dw, errW := time.ParseDuration(strings.Trim(w, `"`))
		if errG != nil || errW != nil || dg != dw {
			t.Errorf("%s:%d: %s: default %s in the reference, %s in the field table", referenceDoc, r.line, r.path, g, w)
		}
	}
}

// jsonText is v as JSON: 1000000 from YAML and 1e+06 from JSON compare equal.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
