// Package promrules checks Prometheus alerting rules against series
// scraped from a running rlproxy: a Recording keeps chosen metrics' values
// from a sequence of /metrics scrapes (one step each), and Check writes
// them as a `promtool test rules` file — one step per minute of promtool
// time, every series labelled job="rlproxy", instance="test" — whose
// assertions are whether an alert fires at given steps, and runs promtool.
// Real time is compressed (a step is however long the test waited between
// scrapes), which keeps ratios of counters and the order of events, the
// things alert expressions judge.
package promrules

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Recording is the values of some metrics over successive scrapes.
type Recording struct {
	names  []string
	values map[string][]string // series (as promtool writes it) → value per step; "_" = absent
	steps  int
}

// NewRecording returns an empty Recording of the metrics named names
// (every series of each).
func NewRecording(names ...string) *Recording {
	return &Recording{names: names, values: map[string][]string{}}
}

// Steps returns how many scrapes the Recording holds.
func (r *Recording) Steps() int { return r.steps }

// Values returns the values per step of the recorded series named series
// as promtool's input writes it (e.g. `m{job="rlproxy",instance="test"}`);
// "_" where it was absent.
func (r *Recording) Values(series string) []string {
	v := slices.Clone(r.values[series])
	for len(v) < r.steps {
		v = append(v, "_")
	}
	return v
}

// Scrape reads metricsURL (an rlproxy's /metrics) and adds one step.
func (r *Recording) Scrape(t testing.TB, metricsURL string) {
	t.Helper()
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatalf("scraping %s: %v", metricsURL, err)
	}
	defer resp.Body.Close()
	if err := r.add(resp.Body); err != nil {
		t.Fatalf("scraping %s: %v", metricsURL, err)
	}
}

// add reads one exposition (text format) as the next step.
func (r *Recording) add(body io.Reader) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if line == "" || line[0] == '#' || i < 0 {
			continue
		}
		series, value := line[:i], line[i+1:]
		name, labels, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
		if !slices.Contains(r.names, name) {
			continue
		}
		key := name + `{job="rlproxy",instance="test"`
		if labels != "" {
			key += "," + labels
		}
		key += "}"
		v := r.values[key]
		for len(v) < r.steps {
			v = append(v, "_")
		}
		r.values[key] = append(v, value)
	}
	r.steps++
	return sc.Err()
}

// Check runs promtool on rules (a rule file's path) with the Recording as
// input and fails t unless alert fires at exactly the steps firing holds
// true for (and not at those it holds false for). Without promtool on
// PATH the test is skipped, unless RLPROXY_REQUIRE_TOOLS=1.
func (r *Recording) Check(t testing.TB, rules, alert string, firing map[int]bool) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("RLPROXY_REQUIRE_TOOLS") == "1" {
			t.Fatal("promtool not found")
		}
		t.Skip("promtool not found: this test did NOT run")
	}
	abs, err := filepath.Abs(rules)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "scraped.test.yaml")
	if err := os.WriteFile(file, []byte(r.testFile(abs, alert, firing)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput()
	if err != nil {
		t.Errorf("promtool test rules (%s on scraped series): %v\n%s\ninput:\n%s", alert, err, out, r.testFile(abs, alert, firing))
	}
}

// testFile is the promtool test file: the series, then for each step of
// firing whether `count(ALERTS{alertname=alert, alertstate="firing"})` is 1.
func (r *Recording) testFile(rules, alert string, firing map[int]bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rule_files: [%q]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n", rules)
	keys := make([]string, 0, len(r.values))
	for k := range r.values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := r.values[k]
		for len(v) < r.steps {
			v = append(v, "_")
		}
		fmt.Fprintf(&b, "      - series: %q\n        values: %q\n", k, strings.Join(v, " "))
	}
	b.WriteString("    promql_expr_test:\n")
	steps := make([]int, 0, len(firing))
	for s := range firing {
		steps = append(steps, s)
	}
	slices.Sort(steps)
	for _, s := range steps {
		fmt.Fprintf(&b, "      - expr: 'count(ALERTS{alertname=%q,alertstate=\"firing\"})'\n        eval_time: %dm\n", alert, s)
		if firing[s] {
			b.WriteString("        exp_samples: [{ labels: '{}', value: 1 }]\n")
		} else {
			b.WriteString("        exp_samples: []\n")
		}
	}
	return b.String()
}
