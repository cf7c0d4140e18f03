package main

import (
	"go/parser"
	"go/token"
	"slices"
	"testing"
)

// TestProblems: each kind of rot is found, and what exists (or belongs to
// another module, or is a configuration path) is not reported.
func TestProblems(t *testing.T) {
	const src = `package proxy

type Runtime struct{ Config int }

func NewRuntimeOn() *Runtime { return nil }

func (r *Runtime) Swap() {}
`
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := &checker{names: names{pkgs: map[string]map[string]bool{}, members: map[string]map[string]bool{}, all: map[string]bool{}},
		files:    map[string]bool{"docs/CONTRACT.md": true, "internal/proxy/proxy.go": true},
		headings: map[string]map[string]bool{"docs/CONTRACT.md": {"Metrics": true}}}
	c.collect("proxy", f)
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"NewRuntimeOn( builds it; proxy.NewRuntimeOn, `Runtime.Swap`, proxy.Swap, `proxy.Runtime.Config`", nil},
		{"http.Handler, `httputil.ReverseProxy`, `server.max_wait`, `listen:`", nil},
		{"(docs/CONTRACT.md, \"Metrics\"), internal/proxy/proxy.go, internal/proxy", nil},
		{"built by NewRuntime(cfg)", []string{"NewRuntime( is not declared in the repository"}},
		{"see proxy.NewRuntime", []string{"proxy.NewRuntime is not declared in the repository"}},
		{"see `Runtime.Close`", []string{"`Runtime.Close` is not declared in the repository"}},
		{"see `newRuntime`", []string{"`newRuntime` is not declared in the repository"}},
		{"in internal/proxy/runtime.go", []string{"internal/proxy/runtime.go does not exist"}},
		{"(docs/CONTRACT.md, \"Metrics\ncontract\")", []string{`docs/CONTRACT.md has no heading "Metrics contract"`}},
	} {
		if got := c.problems(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("problems(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}
