package config

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// tables returns every field table of the file, walked from the top
// (nested sections) plus the tables of named entries and list items.
// Their closures report to l.
func tables(l *loader) map[string]*section {
	out := map[string]*section{
		"upstreams.*": l.upstreamSection(&Upstream{}),
		"policies.*":  l.policySection(&Policy{}),
		"fallback":    fallbackSection(),
		"plans.*":     l.plansSection(&Plans{}, 0),
		"routes[*]":   l.routeSection(&Route{}, map[string]int{}),
	}
	var walk func(path string, s *section)
	walk = func(path string, s *section) {
		out[path] = s
		for _, f := range s.fields {
			if f.sub != nil {
				walk(join(path, f.name), f.sub)
			}
		}
	}
	walk("", l.topSection())
	return out
}

// TestDefaultsDecode: every default a table writes passes its own
// field's checks (so defaultNode never fails), and every field is
// documented and has a shape.
func TestDefaultsDecode(t *testing.T) {
	for path, s := range tables(newLoader("x.yaml", LoadOptions{})) {
		for _, f := range s.fields {
			name := join(path, f.name)
			if f.doc == "" {
				t.Errorf("%s: no doc", name)
			}
			if f.sub == nil && f.shape == nil {
				t.Errorf("%s: no shape", name)
			}
			if f.def == "" || f.set == nil {
				continue
			}
			d := newLoader("x.yaml", LoadOptions{})
			// A fresh table, so the default lands in a fresh Config.
			for _, g := range tables(d)[path].fields {
				if g.name == f.name {
					g.set(defaultNode(g.def), name)
				}
			}
			if p := d.errs.Problems; len(p) > 0 {
				t.Errorf("%s: default %s: %v", name, f.def, p)
			}
		}
	}
}

// TestSchemaFile: docs/rlproxy.schema.json is `rlproxy schema`'s output
// (regenerate it with `go run ./cmd/rlproxy schema > docs/rlproxy.schema.json`).
func TestSchemaFile(t *testing.T) {
	got, err := os.ReadFile("../../docs/rlproxy.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, Schema()) {
		t.Error("docs/rlproxy.schema.json is stale: run go run ./cmd/rlproxy schema > docs/rlproxy.schema.json")
	}
	if !bytes.Contains(got, []byte(`"$schema": "https://json-schema.org/draft/2020-12/schema"`)) {
		t.Error("not a draft 2020-12 schema")
	}
}

// TestOverrides: an override replaces the file's value (and its default),
// is checked as the file's would be with its source named, and turns the
// public listener off when empty.
func TestOverrides(t *testing.T) {
	src := []byte("listen: 127.0.0.1:8081\nupstreams: { app: { builtin: echo } }\nroutes: [{ name: r, upstream: app }]\n")
	c, err := ParseWith("x.yaml", src, LoadOptions{Overrides: Overrides{
		Listen:      &Override{Value: "127.0.0.1:18080", Source: "flag -listen"},
		AdminListen: &Override{Value: ":19090", Source: "environment RLPROXY_ADMIN_LISTEN"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:18080" || c.AdminListen != ":19090" {
		t.Errorf("listen %q, admin_listen %q; want the overrides", c.Listen, c.AdminListen)
	}
	if c, err := ParseWith("x.yaml", src, LoadOptions{}); err != nil || c.Listen != "127.0.0.1:8081" || c.AdminListen != "127.0.0.1:9090" {
		t.Errorf("no overrides: %v; want the file's listen and the default admin_listen", err)
	}
	_, err = ParseWith("x.yaml", src, LoadOptions{Overrides: Overrides{Listen: &Override{Value: "8080", Source: "flag -listen"}}})
	if want := `flag -listen: listen: "8080": want HOST:PORT, e.g. 127.0.0.1:8080 or :8080`; err == nil || err.Error() != want {
		t.Errorf("bad override: %v, want %s", err, want)
	}
	_, err = ParseWith("x.yaml", src, LoadOptions{Overrides: Overrides{AdminListen: &Override{Value: "127.0.0.1:8081", Source: "environment RLPROXY_ADMIN_LISTEN"}}})
	if want := `environment RLPROXY_ADMIN_LISTEN: admin_listen: "127.0.0.1:8081": must not share the public listener "127.0.0.1:8081" (metrics and health stay off the public port)`; err == nil || err.Error() != want {
		t.Errorf("clashing override: %v, want %s", err, want)
	}
	c, err = ParseWith("x.yaml", src, LoadOptions{Overrides: Overrides{Listen: &Override{Value: "", Source: "flag -listen"}}})
	if err != nil || c.Listen != "" {
		t.Errorf("empty override: %v, listen %q; want no public listener", err, c.Listen)
	}
}

// TestDecisionServiceMode: with listen: "" routes need no upstream (a
// decision service answers for them); with a listener they do. The route
// name "-" is reserved.
func TestDecisionServiceMode(t *testing.T) {
	src := "listen: \"\"\npolicies: { p: { algorithm: token_bucket, rate: 1r/s, burst: 1 } }\nroutes: [{ name: r, policies: [p] }]\n"
	c, err := ParseWith("x.yaml", []byte(src), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "" || c.Routes[0].Upstream != "" || c.AdminListen != "127.0.0.1:9090" {
		t.Errorf("listen %q, upstream %q, admin %q", c.Listen, c.Routes[0].Upstream, c.AdminListen)
	}
	_, err = ParseWith("x.yaml", []byte(strings.Replace(src, `listen: ""`, "listen: :8080", 1)), LoadOptions{})
	if want := "x.yaml:3: routes[0].upstream: required: one of upstreams"; err == nil || err.Error() != want {
		t.Errorf("with a listener: %v, want %s", err, want)
	}
	_, err = ParseWith("x.yaml", []byte(strings.Replace(src, "name: r", "name: \"-\"", 1)), LoadOptions{})
	if want := `x.yaml:3: routes[0].name: "-": reserved (the metrics' route label of requests that match no route)`; err == nil || err.Error() != want {
		t.Errorf("route -: %v, want %s", err, want)
	}
}
