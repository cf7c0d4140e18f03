// Command commentcheck fails when a Go comment names something the
// repository does not have: a Go identifier (`pkg.Name`, `Type.Method`,
// `Name` in backticks, pkg.Name or Name( in prose), a repository file
// (a path such as docs/CONTRACT.md) or a heading of a Markdown file cited
// as (docs/CONTRACT.md, "Metrics"). Comments rot when code is renamed or
// removed; a reader then looks for a function that is gone.
//
// Usage, from the repository root: go run ./scripts/commentcheck
// [FILE.go ...] (default: every tracked .go file). It prints one line per
// finding, file:line: what, and exits 1 if there is any.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

// names is what the repository declares.
type names struct {
	pkgs    map[string]map[string]bool // package name → its top-level names and its types' methods
	members map[string]map[string]bool // type name → its fields and methods
	all     map[string]bool            // every declared name, members included
}

func (n *names) add(set map[string]map[string]bool, key, name string) {
	if set[key] == nil {
		set[key] = map[string]bool{}
	}
	set[key][name] = true
	n.all[name] = true
}

// collect records the declarations of f, a file of package pkg.
func (n *names) collect(pkg string, f *ast.File) {
	n.add(n.pkgs, pkg, pkg)
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				n.add(n.pkgs, pkg, d.Name.Name)
				continue
			}
			if t := recvType(d.Recv.List[0].Type); t != "" {
				n.add(n.members, t, d.Name.Name)
				n.add(n.pkgs, pkg, d.Name.Name) // cited as pkg.Method too
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				n.collectSpec(pkg, s)
			}
		}
	}
}

func (n *names) collectSpec(pkg string, s ast.Spec) {
	switch s := s.(type) {
	case *ast.ValueSpec:
		for _, id := range s.Names {
			n.add(n.pkgs, pkg, id.Name)
		}
	case *ast.TypeSpec:
		n.add(n.pkgs, pkg, s.Name.Name)
		var fields *ast.FieldList
		switch t := s.Type.(type) {
		case *ast.StructType:
			fields = t.Fields
		case *ast.InterfaceType:
			fields = t.Methods
		}
		if fields == nil {
			return
		}
		for _, f := range fields.List {
			for _, id := range f.Names {
				n.add(n.members, s.Name.Name, id.Name)
			}
			if len(f.Names) == 0 { // embedded: its name is a member
				if t := recvType(f.Type); t != "" {
					n.add(n.members, s.Name.Name, t)
				}
			}
		}
	}
}

// recvType is the type name of a receiver or embedded field expression.
func recvType(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvType(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.IndexExpr:
		return recvType(t.X)
	case *ast.IndexListExpr:
		return recvType(t.X)
	}
	return ""
}

var (
	backticked = regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*)*)(?:\\(\\))?`")
	qualified  = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Z][A-Za-z0-9_]*))?`)
	called     = regexp.MustCompile(`(?:^|[\s(])([A-Z][a-z]+[A-Z][A-Za-z0-9]*)\(`)
	camel      = regexp.MustCompile(`^[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*$|^[a-z]+[A-Z][A-Za-z0-9]*$`)
	repoFile   = regexp.MustCompile(`(?:^|[\s(,"])((?:docs|internal|cmd|deploy|bench|scripts)/[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.(?:go|md|lua|sh|yaml|yml|json))\b`)
	heading    = regexp.MustCompile(`((?:docs/)?[A-Z][A-Za-z0-9_/-]*\.md)[,:] "([^"]+)"`)
)

// checker holds the repository's names and files.
type checker struct {
	names
	files    map[string]bool
	headings map[string]map[string]bool // Markdown file → its headings
}

// problems returns what comment text (one comment group) names that the
// repository lacks.
func (c *checker) problems(text string) []string {
	var out []string
	seen := map[string]bool{}
	bad := func(format string, args ...any) {
		if p := fmt.Sprintf(format, args...); !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, m := range backticked.FindAllStringSubmatch(text, -1) {
		if !c.known(strings.Split(m[1], "."), true) {
			bad("`%s` is not declared in the repository", m[1])
		}
	}
	for _, m := range qualified.FindAllStringSubmatch(text, -1) {
		parts := []string{m[1], m[2]}
		if m[3] != "" {
			parts = append(parts, m[3])
		}
		if !c.known(parts, false) {
			bad("%s is not declared in the repository", strings.Join(parts, "."))
		}
	}
	for _, m := range called.FindAllStringSubmatch(text, -1) {
		if !c.all[m[1]] {
			bad("%s( is not declared in the repository", m[1])
		}
	}
	for _, m := range repoFile.FindAllStringSubmatch(text, -1) {
		if !c.files[m[1]] && !c.dirHas(m[1]) {
			bad("%s does not exist", m[1])
		}
	}
	for _, m := range heading.FindAllStringSubmatch(flat(text), -1) {
		file := m[1]
		if !strings.Contains(file, "/") {
			file = "docs/" + file
		}
		if h, ok := c.headings[file]; ok && !h[m[2]] {
			bad("%s has no heading %q", file, m[2])
		}
	}
	return out
}

// flat joins a comment's lines, so a cited heading may wrap.
func flat(s string) string { return strings.Join(strings.Fields(s), " ") }

// dirHas reports whether path names a tracked directory (a cited package).
func (c *checker) dirHas(path string) bool {
	for f := range c.files {
		if strings.HasPrefix(f, path+"/") {
			return true
		}
	}
	return false
}

// known reports whether parts (a.b.c) names a repository declaration. A
// first part that is neither a repository package nor a repository type
// is another module's (the standard library's): not checked; nor is a
// configuration path (`server.max_wait`: a lower-case second part without
// an upper-case letter). A lone name is checked only when it looks like Go
// (camelCase, in backticks).
func (c *checker) known(parts []string, ticked bool) bool {
	if len(parts) == 1 {
		return !ticked || !camel.MatchString(parts[0]) || c.all[parts[0]]
	}
	if strings.ToLower(parts[1]) == parts[1] {
		return true
	}
	if pkg, ok := c.pkgs[parts[0]]; ok {
		if !pkg[parts[1]] {
			return false
		}
		return len(parts) < 3 || c.members[parts[1]][parts[2]]
	}
	if mem, ok := c.members[parts[0]]; ok && ticked {
		return mem[parts[1]]
	}
	return true
}

func main() {
	files := os.Args[1:]
	tracked, err := exec.Command("git", "ls-files").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "commentcheck: git ls-files:", err)
		os.Exit(2)
	}
	c := &checker{names: names{pkgs: map[string]map[string]bool{}, members: map[string]map[string]bool{}, all: map[string]bool{}},
		files: map[string]bool{}, headings: map[string]map[string]bool{}}
	var goFiles []string
	for _, f := range strings.Fields(string(tracked)) {
		c.files[f] = true
		switch {
		case strings.HasSuffix(f, ".go"):
			goFiles = append(goFiles, f)
		case strings.HasSuffix(f, ".md"):
			c.headings[f] = readHeadings(f)
		}
	}
	if len(files) == 0 {
		files = goFiles
	}
	fset := token.NewFileSet()
	parsed := map[string]*ast.File{}
	for _, f := range goFiles {
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			continue // testdata with deliberate errors; gofmt and vet report real ones
		}
		parsed[f] = af
		c.collect(af.Name.Name, af)
	}
	found := 0
	for _, f := range files {
		af := parsed[f]
		if af == nil {
			continue
		}
		for _, g := range af.Comments {
			for _, p := range c.problems(g.Text()) {
				fmt.Printf("%s: %s\n", fset.Position(g.Pos()), p)
				found++
			}
		}
	}
	if found > 0 {
		fmt.Fprintf(os.Stderr, "commentcheck: %d comments name what the repository lacks: fix the comment or the name\n", found)
		os.Exit(1)
	}
}

// readHeadings returns the text of the Markdown headings of file.
func readHeadings(file string) map[string]bool {
	h := map[string]bool{}
	b, err := os.ReadFile(file)
	if err != nil {
		return h
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		if l := s.Text(); strings.HasPrefix(l, "#") {
			h[strings.TrimSpace(strings.TrimLeft(l, "#"))] = true
		}
	}
	return h
}
