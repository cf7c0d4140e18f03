package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// chartReport has a measured target with CPU figures and ratios, the
// upstream direct (req/s only) and a target that was not measured.
func chartReport() throughputReport {
	return throughputReport{Targets: []*targetResult{
		{Name: "direct", Status: "ok", FullMedian: &sample{RPS: 42711}, VsBaseline: &ratios{RPS: ptr(1.15)}},
		{Name: "nginx + limit_req", Status: "ok", FullMedian: &sample{RPS: 37016, ProxyCPUus: ptr(19.2)}, VsBaseline: &ratios{RPS: ptr(1), ProxyCPU: ptr(1)}},
		{Name: "Caddy", Status: "not installed"},
		{Name: "rlproxy memory", Status: "ok", FullMedian: &sample{RPS: 28100, ProxyCPUus: ptr(34.3)}, VsBaseline: &ratios{RPS: ptr(0.759), ProxyCPU: ptr(1.786)}},
	}}
}

// svgTexts returns the text elements of the SVG file at path, failing the
// test if it is not well-formed XML.
func svgTexts(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Texts []string `xml:"g>text"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s is not well-formed SVG: %v", path, err)
	}
	return doc.Texts
}

func TestChart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "latest.svg")
	if err := writeChart(path, chartReport()); err != nil {
		t.Fatal(err)
	}
	texts := svgTexts(t, path)
	// Each bar's label: its value and ratio; req/s of all three measured
	// targets, CPU of the two that have it; none for the unmeasured one.
	var labels []string
	bars := regexp.MustCompile(`^[0-9.]+  \([0-9.]+×\)$`)
	for _, s := range texts {
		if bars.MatchString(s) {
			labels = append(labels, s)
		}
		if s == "Caddy" {
			t.Errorf("the unmeasured target has a bar")
		}
	}
	slices.Sort(labels)
	want := []string{"19.2  (1.00×)", "28100  (0.76×)", "34.3  (1.79×)", "37016  (1.00×)", "42711  (1.15×)"}
	if !slices.Equal(labels, want) {
		t.Fatalf("bar labels %q, want %q", labels, want)
	}
	// Names on the axes: the req/s panel has 3, the CPU panel 2.
	count := map[string]int{}
	for _, s := range texts {
		count[s]++
	}
	if count["direct"] != 1 || count["nginx + limit_req"] != 2 || count["rlproxy memory"] != 2 {
		t.Fatalf("axis names %v, want direct 1, nginx + limit_req 2, rlproxy memory 2", count)
	}

	if err := writeChart(filepath.Join(dir, "none.svg"), throughputReport{}); err == nil {
		t.Fatal("a report with no measured target: want an error")
	}
}

// TestRedraw rewrites a report's Markdown, chart and goals from its JSON
// alone, as -redraw does.
func TestRedraw(t *testing.T) {
	dir := t.TempDir()
	rep := chartReport()
	rep.Meta.Settings = map[string]string{"wrk": "-t1 -c32 -d5s", "half_wrk": "-t1 -c8 -d4s", "half_delay_ms": "1", "r": "3", "warmup": "1s", "max_bg_pct": "20"}
	rep.Targets[1].ID, rep.Targets[3].ID = baselineID, "rlproxy_memory"
	rep.Targets[1].Full, rep.Targets[3].Full = runs([]float64{37016}), runs([]float64{28100})
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "run.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := redraw(path); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "run.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"`wrk -t1 -c32 -d5s --latency`, 3 interleaved rounds",
		"`wrk -t1 -c8 -d4s --latency`, each connection pausing 1 ms",
		"| rlproxy memory ÷ nginx + limit_req | req/s | ≥ 0.40× | 0.759× | 0.76 | met |",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("run.md lacks %q:\n%s", want, md)
		}
	}
	var back throughputReport
	b, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &back); err != nil || len(back.Goals) != 1 || len(back.Targets) != 4 {
		t.Fatalf("rewritten JSON: %d goals, %d targets, %v; want 1, 4", len(back.Goals), len(back.Targets), err)
	}
	direct := filepath.Join(dir, "direct.svg")
	if err := writeChart(direct, rep); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(direct)
	c, err := os.ReadFile(filepath.Join(dir, "run.svg"))
	if err != nil || string(a) != string(c) {
		t.Fatalf("redrawn chart differs from writeChart's (err %v)", err)
	}

	delete(rep.Meta.Settings, "r")
	b, _ = json.Marshal(rep)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := redraw(path); err == nil {
		t.Fatal("a report without its rounds setting: want an error")
	}
}
