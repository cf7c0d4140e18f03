// Package schematest validates rlproxy's configuration files against the
// JSON Schema the loader's field tables generate (config.Schema), with a
// real validator. It is a module of its own so the validator is not in the
// product's go.mod (scripts/test.sh runs it).
package schematest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"rlproxy/internal/config"
)

// root is the repository, from this package's directory.
const root = "../../.."

// marker starts the first line of every example config: it points editors
// (yaml-language-server) at the committed schema.
const marker = "# yaml-language-server: $schema="

// compile compiles config.Schema() as draft 2020-12 (which checks it
// against the meta-schema).
func compile(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(config.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("rlproxy.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("rlproxy.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// validate decodes a YAML file as JSON values (merge keys resolved) and
// validates it; a file YAML itself refuses (syntax, duplicate keys) is an
// error too.
func validate(s *jsonschema.Schema, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return err
	}
	js, err := json.Marshal(v)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// exampleConfigs lists the rlproxy config files shipped as examples: every
// one in configs/ (keys files aside), deploy/compose/rlproxy.yaml, bench's, and any
// other file under configs/, deploy/ and bench/configs that names the
// schema in its first line.
func exampleConfigs(t *testing.T) (all, mustMark []string) {
	t.Helper()
	for _, pattern := range []string{"configs/*.yaml", "deploy/compose/rlproxy.yaml", "bench/configs/rlproxy-*.yaml"} {
		files, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if !strings.HasSuffix(f, ".keys.yaml") {
				mustMark = append(mustMark, f)
			}
		}
	}
	all = slices.Clone(mustMark)
	for _, dir := range []string{"configs", "deploy", "bench/configs"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
				return err
			}
			if _, ok := schemaRef(t, p); ok && !slices.Contains(all, p) {
				all = append(all, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return all, mustMark
}

// schemaRef returns the schema path named by path's first line.
func schemaRef(t *testing.T, path string) (string, bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return "", false
	}
	return strings.CutPrefix(sc.Text(), marker)
}

// TestExampleConfigsValidate: every example config names the committed
// schema in its first line, and validates against the generated schema.
func TestExampleConfigsValidate(t *testing.T) {
	s := compile(t)
	all, mustMark := exampleConfigs(t)
	if len(mustMark) < 10 {
		t.Fatalf("found %d example configs, want at least 10: %v", len(mustMark), mustMark)
	}
	committed, err := filepath.Abs(filepath.Join(root, "docs", "rlproxy.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range all {
		ref, ok := schemaRef(t, f)
		if abs, _ := filepath.Abs(filepath.Join(filepath.Dir(f), ref)); !ok || abs != committed {
			t.Errorf("%s: first line must be %s<relative path of docs/rlproxy.schema.json>; it names %q", f, marker, ref)
		}
		if err := validate(s, f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// fixtures classifies every config fixture of internal/config/testdata:
// "valid", "shape" (the schema or YAML rejects it), or why it is invalid
// only for Parse (the schema accepts it).
var fixtures = map[string]string{
	"spec_example.yaml":               "valid",
	"extensions.yaml":                 "valid",
	"duplicate_field.yaml":            "shape",
	"field_of_other_algorithm.yaml":   "shape",
	"many_mistakes.yaml":              "shape",
	"misspelled_key.yaml":             "shape",
	"no_routes.yaml":                  "shape",
	"rate_without_unit.yaml":          "shape",
	"token_bucket_without_burst.yaml": "shape",
	"yaml_syntax.yaml":                "shape",
	"zero_rate.yaml":                  "shape",
	"bad_cidr.yaml":                   "an address's syntax and range (10.0.0.0/33) is not a pattern's job",
	"bad_regex.yaml":                  "whether a regular expression compiles",
	"cost_above_quota.yaml":           "a route's cost against a policy's quota: two sections",
	"delay_with_nodelay.yaml":         "a rule between two valid fields (delay with nodelay: true)",
	"fallback_with_deny.yaml":         "a rule between two valid fields (fallback with on_store_error: deny)",
	"missing_password_env.yaml":       "the environment (an unset variable)",
	"plan_unknown_policy.yaml":        "references between sections (a plan names an undefined policy)",
	"unknown_upstream.yaml":           "references between sections (a route names an undefined upstream)",
	"unreachable_key_source.yaml":     "the order of valid key sources (ip, always present, before another)",
	"window_not_whole_ms.yaml":        "a duration's value (1500us is not whole milliseconds)",
}

// TestFixtures: the valid fixtures validate, the shape-invalid ones are
// rejected, and the ones invalid only semantically pass the schema (so
// the list stays honest); every fixture is classified.
func TestFixtures(t *testing.T) {
	s := compile(t)
	files, err := filepath.Glob(filepath.Join(root, "internal/config/testdata/*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasSuffix(name, ".keys.yaml") {
			continue // a plans keys_file, not a config
		}
		seen++
		kind, ok := fixtures[name]
		if !ok {
			t.Errorf("%s: not classified in fixtures", name)
			continue
		}
		err := validate(s, f)
		switch {
		case kind == "shape" && err == nil:
			t.Errorf("%s: the schema accepts it, want it rejected", name)
		case kind != "shape" && err != nil:
			t.Errorf("%s (%s): the schema rejects it: %v", name, kind, err)
		}
	}
	if seen != len(fixtures) {
		t.Errorf("%d fixtures in testdata, %d classified", seen, len(fixtures))
	}
}

// TestRulesAcrossFields: the rules the schema adds to its tables (the
// extend hooks) accept and reject what Parse does.
func TestRulesAcrossFields(t *testing.T) {
	s := compile(t)
	const pol = "policies: { p: { algorithm: token_bucket, rate: 1r/s, burst: 1 } }\n"
	for _, tc := range []struct {
		name, src string
		valid     bool
	}{
		{"decision mode needs no upstream", "listen: \"\"\n" + pol + "routes: [{ name: r, policies: [p] }]\n", true},
		{"a listener needs upstreams", pol + "routes: [{ name: r, policies: [p] }]\n", false},
		{"upstream url", "upstreams: { a: { url: \"http://x:1/p\" } }\nroutes: [{ name: r, upstream: a }]\n", true},
		{"upstream url and builtin", "upstreams: { a: { url: \"http://x:1\", builtin: echo } }\nroutes: [{ name: r, upstream: a }]\n", false},
		{"valkey with addrs", "store: { type: valkey, valkey: { addrs: \"v:6379\" } }\nupstreams: { a: { builtin: echo } }\nroutes: [{ name: r, upstream: a }]\n", true},
		{"valkey without addrs", "store: { type: valkey, valkey: { addrs: [] } }\nupstreams: { a: { builtin: echo } }\nroutes: [{ name: r, upstream: a }]\n", false},
		{"zero body_timeout", "server: { body_timeout: 0 }\nupstreams: { a: { builtin: echo } }\nroutes: [{ name: r, upstream: a }]\n", true},
		{"rewrite and wildcard host", "upstreams: { a: { builtin: echo } }\nroutes: [{ name: r, upstream: a, match: { host: \"*.example.com\", path_prefix: /api/ }, rewrite: /v2/ }]\n", true},
		{"strip_prefix without /", "upstreams: { a: { builtin: echo } }\nroutes: [{ name: r, upstream: a, strip_prefix: api }]\n", false},
		{"strip_prefix and rewrite", "upstreams: { a: { builtin: echo } }\nroutes: [{ name: r, upstream: a, strip_prefix: /api, rewrite: /v2/ }]\n", false},
		{"bad policy name", "policies: { \"a b\": { algorithm: concurrency, limit: 1 } }\nupstreams: { a: { builtin: echo } }\nroutes: [{ name: r, upstream: a }]\n", false},
	} {
		f := filepath.Join(t.TempDir(), "x.yaml")
		if err := os.WriteFile(f, []byte(tc.src), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := validate(s, f); (err == nil) != tc.valid {
			t.Errorf("%s: valid=%v, want %v (%v)", tc.name, err == nil, tc.valid, err)
		}
		// Parse agrees (env-free cases).
		if _, err := config.ParseWith(f, []byte(tc.src), config.LoadOptions{}); (err == nil) != tc.valid {
			t.Errorf("%s: Parse: %v; want valid=%v", tc.name, err, tc.valid)
		}
	}
}
