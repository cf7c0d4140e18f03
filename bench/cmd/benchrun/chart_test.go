package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

	// -chart redraws the same SVG from the JSON report.
	b, err := json.Marshal(chartReport())
	if err != nil {
		t.Fatal(err)
	}
	js := filepath.Join(dir, "copy.json")
	if err := os.WriteFile(js, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := redrawChart(js); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(path)
	c, err := os.ReadFile(filepath.Join(dir, "copy.svg"))
	if err != nil || string(a) != string(c) {
		t.Fatalf("redrawn chart differs from the original (err %v)", err)
	}

	if err := writeChart(filepath.Join(dir, "none.svg"), throughputReport{}); err == nil {
		t.Fatal("a report with no measured target: want an error")
	}
}
