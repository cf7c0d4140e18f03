package config

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// exampleRE finds the README's examples that stand for a file of the
// repository: a "<!-- example:PATH -->" line, then a fenced code block.
var exampleRE = regexp.MustCompile("(?s)<!-- example:([^ ]+) -->\n```[a-z]*\n(.*?)\n```")

// TestReadmeExamples holds every such block equal to the file it names, so
// the production example operators copy is the one TestConfigsDir loads.
func TestReadmeExamples(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	found := exampleRE.FindAllSubmatch(readme, -1)
	if len(found) == 0 {
		t.Fatal("README.md has no <!-- example:PATH --> block")
	}
	for _, m := range found {
		path := string(m[1])
		want, err := os.ReadFile(filepath.Join("../..", path))
		if err != nil {
			t.Errorf("README.md example %s: %v", path, err)
			continue
		}
		if got := string(m[2]) + "\n"; got != string(want) {
			t.Errorf("README.md's example differs from %s: copy the file into the README", path)
		}
	}
}
