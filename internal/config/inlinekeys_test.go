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

// inlineKeysConfig is a config with n inline credentials (every 7th on
// plan "gold", which does not exist, when bad; credential 3 again at the
// end when dup), and a keys_file line when file is not "".
func inlineKeysConfig(n int, bad, dup bool, file string) string {
	var b strings.Builder
	b.WriteString(`upstreams: { app: { builtin: echo } }
policies:
  free: { algorithm: fixed_window, limit: 10, window: 1h }
  pro: { algorithm: fixed_window, limit: 1000, window: 1h }
routes: [ { name: r, upstream: app, plan: tiers } ]
plans:
  tiers:
    key: header:X-API-Key
    default: free
    plans: { free: [free], pro: [pro] }
    keys:   # inline
`)
	for i := range n {
		plan := "pro"
		if bad && i%7 == 0 {
			plan = "gold"
		}
		fmt.Fprintf(&b, "      key-%06d: %s\n", i, plan)
		if i == n/2 {
			b.WriteString("\n      # a comment in the middle\n")
		}
	}
	if dup {
		b.WriteString("      key-000003: free\n")
	}
	if file != "" {
		fmt.Fprintf(&b, "    keys_file: %q\n", file)
	}
	b.WriteString("log: { level: info }\n")
	return b.String()
}

// TestInlineKeysOutsideYAML: a large inline keys mapping read line by line
// gives exactly the credentials and problems (file, line, field, message)
// of the YAML tree, with and without a keys_file repeating some of them.
func TestInlineKeysOutsideYAML(t *testing.T) {
	dir := t.TempDir()
	kf := filepath.Join(dir, "keys.yaml")
	if err := os.WriteFile(kf, []byte("key-000010: free\nother: pro\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		bad, dup bool
		file     string
	}{{"valid", false, false, ""}, {"unknown plans", true, false, ""}, {"repeated", false, true, ""}, {"keys_file", false, false, kf}} {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(inlineKeysConfig(flatBlockMin+100, tc.bad, tc.dup, tc.file))
			if _, blocks := flatBlocks(data); len(blocks) != 1 {
				t.Fatalf("%d blocks cut, want 1", len(blocks))
			}
			path := filepath.Join(dir, "c.yaml")
			cut, cutErr := parse(path, data, LoadOptions{}, true)
			tree, treeErr := parse(path, data, LoadOptions{}, false)
			if fmt.Sprint(cutErr) != fmt.Sprint(treeErr) {
				t.Fatalf("problems differ:\nline by line: %v\nYAML tree:    %v", cutErr, treeErr)
			}
			if treeErr != nil {
				return
			}
			got, want := slices.Collect(keysOf(cut)), slices.Collect(keysOf(tree))
			if len(want) != flatBlockMin+100 || !reflect.DeepEqual(got, want) {
				t.Errorf("credentials: %d line by line, %d from the YAML tree (want %d, equal)", len(got), len(want), flatBlockMin+100)
			}
			if cut.Digest != tree.Digest {
				t.Error("digests differ")
			}
		})
	}
}

// keysOf lists c's tiers credentials as "credential=plan".
func keysOf(c *Config) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k, p := range c.Plans["tiers"].Keys.All() {
			if !yield(k + "=" + p) {
				return
			}
		}
	}
}

// TestInlineKeysSmallOrOddStayYAML: a keys mapping below flatBlockMin, or
// with one line not in the flat form, is not cut out of the YAML.
func TestInlineKeysSmallOrOddStayYAML(t *testing.T) {
	small := inlineKeysConfig(flatBlockMin-1, false, false, "")
	odd := strings.Replace(inlineKeysConfig(flatBlockMin+1, false, false, ""), "key-000005: pro", `"key-000005": pro`, 1)
	for _, data := range []string{small, odd} {
		if _, blocks := flatBlocks([]byte(data)); blocks != nil {
			t.Errorf("%d blocks cut, want none", len(blocks))
		}
	}
}
