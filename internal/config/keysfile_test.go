package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// keysBoth parses data as a keys file both ways: the flat fast path
// (ok false when it declines) and yaml.v3's tree.
func keysBoth(data string, seen map[string]string) (flat, tree *Plans, flatErrs, treeErrs []Problem, ok bool) {
	plans := []string{"free", "pro", "true"}
	run := func(fast bool) (*Plans, []Problem, bool) {
		p := &Plans{Keys: &Credentials{}}
		s := map[string]string{}
		for k, v := range seen {
			s[k] = v
		}
		d := &decoder{file: "k.yaml", errs: &Errors{}}
		if fast {
			if !flatKeys(d, data, p, plans, s) {
				return nil, nil, false
			}
		} else if root, ok := d.document([]byte(data)); ok {
			credentials(d, root, "", p, plans, s)
		}
		return p, d.errs.Problems, true
	}
	flat, flatErrs, ok = run(true)
	tree, treeErrs, _ = run(false)
	return
}

// TestFlatKeysMatchesYAML: for files in the flat form the line parser gives
// exactly the keys and problems of the YAML path; for anything else it
// declines (and the YAML path decides).
func TestFlatKeysMatchesYAML(t *testing.T) {
	flat := []string{
		"",
		"# only a comment\n",
		"a1: free\nb2: pro\n",
		"a1: free\nb2: pro", // no final newline
		"k-1.x/y+z=w~v@u$t: pro   # a comment\n\n  # indented comment\nk2:   free\n",
		"null: free\ntrue: pro\n123: true\n0x1F: free\n", // keys are their text, whatever YAML's type
		"a: free\na: pro\nb: gold\nb: free\nc: prx\n",    // a repeat, an unknown plan, a repeat of a failed key
		"x: free\ny: pro\nx: pro\ny: free\n",             // repeats found late: first lines still right
		"inline: free\n",                                 // listed in keys: too
		manyKeys(5000, ""),                               // valid: no repeat among thousands
		manyKeys(5000, "k0001234: pro\n"),                // one repeat at the end, of a line far before
	}
	declined := []string{
		"a: 'free'\n", "a: \"free\"\n", "a: free\n  more\n", "{a: free}\n", "- a\n", "a: &x free\nb: *x\n",
		"a: null\n", "a: ~\n", "a:\n", "a:free\n", "a: b: c\n", "a: free x\n", "a: free\r\n", "---\na: free\n",
		"a:\tfree\n", "? a\n: free\n", "<<: {a: free}\n", "ключ: free\n", "\ufeffa: free\n", "a#b: free\n", " a: free\n",
	}
	seen := map[string]string{"inline": "c.yaml:3"}
	for _, data := range flat {
		f, tr, fe, te, ok := keysBoth(data, seen)
		if !ok {
			t.Errorf("%q: flat path declined", data)
			continue
		}
		if !slices.Equal(f.Keys.list, tr.Keys.list) || !slices.Equal(f.Keys.plans, tr.Keys.plans) || !reflect.DeepEqual(fe, te) {
			t.Errorf("%q:\nflat keys %v problems %v\nyaml keys %v problems %v", data, *f.Keys, fe, *tr.Keys, te)
		}
	}
	for _, data := range declined {
		if _, _, _, _, ok := keysBoth(data, seen); ok {
			t.Errorf("%q: flat path accepted a file it cannot read exactly", data)
		}
	}
}

// manyKeys is n distinct `credential: plan` lines, then tail.
func manyKeys(n int, tail string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "k%07d: %s\n", i, []string{"free", "pro"}[i%2])
	}
	return b.String() + tail
}

// TestRepeated: the set finds a repeat wherever it is, and none in
// distinct credentials, for lists of 0 to 10,000.
func TestRepeated(t *testing.T) {
	list := func(keys ...string) []credential {
		var l []credential
		for _, k := range keys {
			l = append(l, credential{key: k})
		}
		return l
	}
	for _, n := range []int{0, 1, 2, 3, 10_000} {
		var keys []string
		for i := range n {
			keys = append(keys, fmt.Sprintf("c%d", i))
		}
		if repeated(list(keys...)) {
			t.Errorf("%d distinct credentials: a repeat found", n)
		}
		if n == 0 {
			continue
		}
		for _, at := range []int{0, n / 2, n - 1} {
			withRepeat := slices.Insert(slices.Clone(keys), at, keys[n-1-at])
			if !repeated(list(withRepeat...)) {
				t.Errorf("%d credentials and a repeat of %q at %d: none found", n, keys[n-1-at], at)
			}
		}
	}
	if !repeated(list("a", "b", "a")) || repeated(list("a", "ab", "ba", "b")) {
		t.Error("a, b, a: want a repeat; a, ab, ba, b: want none")
	}
}

// TestFileSizeLimit: a config file or keys_file over the limit is refused
// before parsing, named FILE: or FILE:LINE: field:.
func TestFileSizeLimit(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	keys := filepath.Join(dir, "k.yaml")
	src := `upstreams: { app: { builtin: echo } }
policies: { p: { algorithm: fixed_window, limit: 1, window: 1s } }
plans:
  t:
    key: header:K
    keys_file: k.yaml
    default: free
    plans: { free: [p] }
routes: [{ name: r, upstream: app, plan: t }]
`
	write := func(path, s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(cfg, src)
	var kb strings.Builder
	for i := range 100 {
		fmt.Fprintf(&kb, "key%05d: free\n", i) // 15 bytes each
	}
	write(keys, kb.String())
	if _, err := LoadWith(cfg, LoadOptions{MaxFileBytes: 1500}); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	_, err := LoadWith(cfg, LoadOptions{MaxFileBytes: 1499})
	if want := cfg + `:6: plans.t.keys_file: "k.yaml": 1500 bytes, over the limit of 1499 bytes (rlproxy -max-config-bytes)`; err == nil || err.Error() != want {
		t.Errorf("keys_file over the limit: %v\nwant %s", err, want)
	}
	_, err = LoadWith(cfg, LoadOptions{MaxFileBytes: 100})
	if want := fmt.Sprintf("%s: %d bytes, over the limit of 100 bytes (rlproxy -max-config-bytes)", cfg, len(src)); err == nil || err.Error() != want {
		t.Errorf("config over the limit: %v\nwant %s", err, want)
	}
}

// TestSummary: at most n problems, each cut to 256 bytes, then the count
// of the rest.
func TestSummary(t *testing.T) {
	e := &Errors{}
	for i := range 150 {
		e.Problems = append(e.Problems, Problem{File: "k.yaml", Line: i + 1, Msg: "unknown plan"})
	}
	e.Problems[0].Msg = strings.Repeat("é", 200) // 400 bytes
	s := e.Summary(100)
	lines := strings.Split(s, "\n")
	if len(lines) != 101 || lines[100] != "and 50 more problems (rlproxy validate lists them all)" {
		t.Fatalf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
	if !strings.HasSuffix(lines[0], "é…") || len(lines[0]) > summaryProblemBytes+len("…") {
		t.Errorf("long problem not cut at a rune: %d bytes %q", len(lines[0]), lines[0][len(lines[0])-8:])
	}
	if lines[99] != "k.yaml:100: unknown plan" {
		t.Errorf("100th line %q", lines[99])
	}
	if got := (&Errors{Problems: e.Problems[1:3]}).Summary(100); got != "k.yaml:2: unknown plan\nk.yaml:3: unknown plan" {
		t.Errorf("short summary %q", got)
	}
}
