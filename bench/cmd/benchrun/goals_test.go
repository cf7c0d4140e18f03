package main

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// runs makes one sample per req/s value (and per added p99, when given).
func runs(rps []float64, addedP99 ...float64) []sample {
	out := make([]sample, len(rps))
	for i, v := range rps {
		out[i].RPS = v
		if i < len(addedP99) {
			out[i].AddedP99us = ptr(addedP99[i])
		}
	}
	return out
}

func near(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Abs(x-y) < 1e-9 })
}

func TestGoals(t *testing.T) {
	results := []*targetResult{
		{ID: baselineID, Name: "nginx", Full: runs([]float64{300, 300, 300}), Half: runs([]float64{1, 1, 1}, 100, 200, 300)},
		{ID: "minproxy", Name: "minproxy", Full: runs([]float64{100, 100, 100})},
		{ID: "caddy", Name: "Caddy", Status: "not installed"},
		{ID: "rlproxy_memory", Name: "memory", Full: runs([]float64{110, 90, 120}), Half: runs([]float64{1, 1, 1}, 150, 150, 700)},
		{ID: "rlproxy_valkey", Name: "Valkey", Full: runs([]float64{80, 85, 90})},
		{ID: "rlproxy_memory_keys", Name: "memory 10k", Full: runs([]float64{100, 100})},
		{ID: "rlproxy_valkey_keys", Name: "Valkey 10k", Full: runs([]float64{70, 75, 80})},
	}
	got := evalGoals(results, issueGoals())
	type want struct {
		num, den string
		ratio    float64
		rounds   []float64
		met      string // "met", "not met" or "" (no verdict)
		note     string
	}
	wants := []want{
		{"rlproxy_memory", "minproxy", 1.1, []float64{1.1, 0.9, 1.2}, "met", ""},
		{"rlproxy_memory", "caddy", 0, nil, "", "not measured"},
		{"rlproxy_memory", baselineID, 110.0 / 300, []float64{110.0 / 300, 90.0 / 300, 120.0 / 300}, "not met", ""},
		{"rlproxy_valkey", "rlproxy_memory", 85.0 / 110, []float64{80.0 / 110, 85.0 / 90, 90.0 / 120}, "not met", ""},
		// memory 10k missed its last round: the shared rounds, no verdict
		{"rlproxy_valkey_keys", "rlproxy_memory_keys", 0.75, []float64{0.7, 0.75}, "", "3 and 2 of 3 rounds (a target failed)"},
		// half load: medians 150 and 200 µs added
		{"rlproxy_memory", baselineID, 0.75, []float64{1.5, 0.75, 700.0 / 300}, "met", ""},
		{"rlproxy_valkey", baselineID, 0, nil, "", "not measured"},
		{"rlproxy_accesslog", "rlproxy", 0, nil, "", "not measured"},
		{"rlproxy_pool1", "rlproxy", 0, nil, "", "not measured"},
		{"rlproxy_valkey_allot", "rlproxy_memory", 0, nil, "", "not measured"},
		{"rlproxy_memory", "rlproxy_memory_std", 0, nil, "", "not measured"},
		{"rlproxy_memory", "ceiling", 0, nil, "", "not measured"},
	}
	if len(got) != len(wants) {
		t.Fatalf("%d goals, want %d: %+v", len(got), len(wants), got)
	}
	for i, w := range wants {
		g := got[i]
		met := ""
		if g.Met != nil {
			met = map[bool]string{true: "met", false: "not met"}[*g.Met]
		}
		if g.Num != w.num || g.Den != w.den || math.Abs(g.Ratio-w.ratio) > 1e-9 || !near(g.PerRound, w.rounds) || met != w.met || g.Note != w.note {
			t.Errorf("goal %d = %s/%s %v %v %q %q, want %s/%s %v %v %q %q", i, g.Num, g.Den, g.Ratio, g.PerRound, met, g.Note, w.num, w.den, w.ratio, w.rounds, w.met, w.note)
		}
	}
	if got[5].Measure != "half-load p99 added" || got[0].Measure != "req/s" {
		t.Errorf("measures %q, %q", got[0].Measure, got[5].Measure)
	}

	var b strings.Builder
	goalsMarkdown(&b, got, map[string]string{"rlproxy_valkey": "Valkey", "rlproxy_memory": "memory", "minproxy": "minproxy", baselineID: "nginx", "rlproxy_valkey_keys": "Valkey 10k", "rlproxy_memory_keys": "memory 10k"})
	md := b.String()
	for _, row := range []string{
		"| Valkey ÷ memory | req/s | ≥ 0.85× | 0.773× | 0.73 0.94 0.75 | **not met** |",
		"| memory ÷ minproxy | req/s | ≥ 0.95× | 1.100× | 1.10 0.90 1.20 | met |",
		"| memory ÷ caddy | req/s | ≥ 1.10× | – |  | not measured |",
		"| Valkey 10k ÷ memory 10k | req/s | reported | 0.750× | 0.70 0.75 | 3 and 2 of 3 rounds (a target failed) |",
		"| memory ÷ nginx | half-load p99 added | ≤ 2.00× | 0.750× | 1.50 0.75 2.33 | met |",
	} {
		if !strings.Contains(md, row) {
			t.Errorf("markdown lacks %q:\n%s", row, md)
		}
	}
}

// TestGoalsNoDivisor: p99 added over direct can be negative in a noisy
// round; a ratio to it means nothing, so there is none (and no verdict).
func TestGoalsNoDivisor(t *testing.T) {
	results := []*targetResult{
		{ID: baselineID, Full: runs([]float64{1, 1, 1}), Half: runs([]float64{1, 1, 1}, -20, -10, 5)},
		{ID: "rlproxy_memory", Full: runs([]float64{1, 1, 1}), Half: runs([]float64{1, 1, 1}, 100, 100, 100)},
	}
	g := evalGoals(results, []goal{{num: "rlproxy_memory", den: baselineID, halfP99: true, atMost: 2}})[0]
	if g.Met != nil || g.Ratio != 0 || g.PerRound != nil || g.Note != "no ratio: the divisor's median is -10" {
		t.Fatalf("got %+v, want no ratio, no verdict", g)
	}
}

// TestABGoals: a run with base twins gets one mark per pair, row ÷ twin,
// at least 0.95; rows without a twin get none.
func TestABGoals(t *testing.T) {
	results := []*targetResult{
		{ID: "rlproxy_memory", Full: runs([]float64{96, 100, 98})},
		{ID: "rlproxy_memory@base", Full: runs([]float64{100, 100, 100})},
		{ID: "minproxy", Full: runs([]float64{100})},
	}
	for _, r := range results {
		r.FullMedian = medianSample(r.Full)
	}
	gs := abGoals(results)
	if len(gs) != 1 || gs[0] != (goal{num: "rlproxy_memory", den: "rlproxy_memory@base", atLeast: 0.95}) {
		t.Fatalf("abGoals = %+v", gs)
	}
	got := evalGoals(results, gs)
	if got[0].Ratio != 0.98 || got[0].Met == nil || !*got[0].Met {
		t.Fatalf("A/B mark = %+v, want ratio 0.98, met", got[0])
	}
}

// TestBaseTwins: with a base build every rlproxy row is followed by its
// twin; other rows get none, and without a base nothing changes.
func TestBaseTwins(t *testing.T) {
	specs := []targetSpec{{id: "minproxy", kind: "minproxy"}, {id: "rlproxy_memory", name: "m", kind: "rlproxy"}}
	if got := withBaseTwins(specs, false); len(got) != 2 {
		t.Fatalf("no base: %d specs", len(got))
	}
	got := withBaseTwins(specs, true)
	if len(got) != 3 || got[2].id != "rlproxy_memory@base" || got[2].name != "m (base)" {
		t.Fatalf("twins = %+v", got)
	}
}
