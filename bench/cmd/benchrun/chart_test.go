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

// TestRedraw recomputes a report's medians, ratios, CPU check and marks
// from its runs and rewrites its JSON, Markdown and chart, as -redraw does.
func TestRedraw(t *testing.T) {
	dir := t.TempDir()
	cpu := func(rps []float64, us ...float64) []sample {
		s := runs(rps)
		for i := range s {
			s[i].ProxyCPUus = ptr(us[i])
		}
		return s
	}
	rep := throughputReport{
		Meta: meta{Settings: map[string]string{"wrk": "-t1 -c32 -d5s", "half_wrk": "-t1 -c8 -d4s", "half_delay_ms": "1", "r": "3", "warmup": "1s", "max_bg_pct": "20"}},
		Targets: []*targetResult{
			{ID: baselineID, Name: "nginx + limit_req", Status: "ok", Full: cpu([]float64{36000, 37016, 38000}, 19, 19, 19)},
			// stale medians: redraw must recompute them from the runs
			{ID: "rlproxy_memory", Name: "rlproxy memory", Status: "ok", Full: cpu([]float64{28100, 27000, 29000}, 34.3, 35, 33), FullMedian: &sample{RPS: 1}},
		},
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "run.JSON")
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
		"| rlproxy memory | 28100 | 0.76× |",
		// 37,016 req/s × 19 µs: nginx kept its CPU 70 % busy, so the
		// ratio is no mark (a report from before the check gets it too).
		"| rlproxy memory ÷ nginx + limit_req | req/s | ≥ 0.40× | 0.759× | 0.78 0.73 0.76 | no mark: load-bound (nginx + limit_req 70.3 % busy, under 90 %) |",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("run.md lacks %q:\n%s", want, md)
		}
	}
	var back throughputReport
	if b, err = os.ReadFile(filepath.Join(dir, "run.json")); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &back); err != nil || len(back.Goals) != len(issueGoals()) || back.Targets[1].FullMedian.RPS != 28100 {
		t.Fatalf("rewritten JSON: %d goals, memory median %+v, %v; want %d, 28100", len(back.Goals), back.Targets[1].FullMedian, err, len(issueGoals()))
	}
	texts := svgTexts(t, filepath.Join(dir, "run.svg"))
	for _, want := range []string{"28100  (0.76×)", "34.3  (1.81×)", "37016  (1.00×)"} {
		if !slices.Contains(texts, want) {
			t.Errorf("chart lacks label %q: %q", want, texts)
		}
	}

	// Nothing measured: no chart, and an older one is removed.
	for _, r := range rep.Targets {
		r.Status, r.Full = "not built", nil
	}
	b, _ = json.Marshal(rep)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := redraw(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "run.svg")); !os.IsNotExist(err) {
		t.Fatalf("a run that measured nothing left a chart (stat: %v)", err)
	}

	attack := filepath.Join(dir, "attack.json")
	if err := os.WriteFile(attack, []byte(`{"meta":{"settings":{"clients":"50"}},"targets":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := redraw(attack); err == nil || !strings.Contains(err.Error(), "not a throughput report") {
		t.Fatalf("attack report: got %v, want not a throughput report", err)
	}

	delete(rep.Meta.Settings, "r")
	b, _ = json.Marshal(rep)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := redraw(path); err == nil || !strings.Contains(err.Error(), `meta.settings.r ""`) {
		t.Fatalf("a report without its rounds setting: got %v, want an error naming meta.settings.r", err)
	}
}
