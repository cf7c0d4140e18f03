package main

import (
	"fmt"
	"strings"
)

// goal is one of issue 7's marks on a run's medians: the full-load req/s of
// target num ÷ that of target den (or, with halfP99, the p99 latency that
// num adds at half load ÷ what den adds), against a bound. A bound of 0
// reports the ratio only.
type goal struct {
	num, den string // target ids
	halfP99  bool   // half-load p99 added over direct, not full-load req/s
	atLeast  float64
	atMost   float64
}

// issueGoals are issue 7's pass marks ("What it must show", 1), plus the
// 10k-client pair, reported without a mark.
func issueGoals() []goal {
	return []goal{
		{num: "rlproxy_memory", den: "minproxy", atLeast: 0.95},
		{num: "rlproxy_memory", den: "caddy", atLeast: 1.1},
		{num: "rlproxy_memory", den: baselineID, atLeast: 0.4},
		{num: "rlproxy_valkey", den: "rlproxy_memory", atLeast: 0.85},
		{num: "rlproxy_valkey_keys", den: "rlproxy_memory_keys"},
		{num: "rlproxy_memory", den: baselineID, halfP99: true, atMost: 2},
	}
}

// goalResult is a goal's outcome in one run (latest.json "goals").
type goalResult struct {
	Num     string  `json:"num"`
	Den     string  `json:"den"`
	Measure string  `json:"measure"` // "req/s" or "half-load p99 added"
	AtLeast float64 `json:"at_least,omitempty"`
	AtMost  float64 `json:"at_most,omitempty"`
	// Ratio divides num's median by den's; PerRound divides round by round
	// (empty when either target missed a round).
	Ratio    float64   `json:"ratio"`
	PerRound []float64 `json:"per_round,omitempty"`
	// Met is nil for a goal without a bound.
	Met *bool `json:"met,omitempty"`
}

// evalGoals returns the outcome of every goal whose two targets were
// measured.
func evalGoals(results []*targetResult, goals []goal) []goalResult {
	byID := map[string]*targetResult{}
	for _, r := range results {
		byID[r.ID] = r
	}
	var out []goalResult
	for _, g := range goals {
		n, d := byID[g.num], byID[g.den]
		if n == nil || d == nil {
			continue
		}
		ns, ds := n.Full, d.Full
		figure := func(s sample) (float64, bool) { return s.RPS, true }
		measure := "req/s"
		if g.halfP99 {
			ns, ds = n.Half, d.Half
			figure = func(s sample) (float64, bool) {
				if s.AddedP99us == nil {
					return 0, false
				}
				return *s.AddedP99us, true
			}
			measure = "half-load p99 added"
		}
		if len(ns) == 0 || len(ds) == 0 {
			continue
		}
		nm, nok := figure(*medianSample(ns))
		dm, dok := figure(*medianSample(ds))
		if !nok || !dok || dm == 0 {
			continue
		}
		r := goalResult{Num: g.num, Den: g.den, Measure: measure, AtLeast: g.atLeast, AtMost: g.atMost, Ratio: nm / dm}
		if len(ns) == len(ds) {
			for i := range ns {
				a, aok := figure(ns[i])
				b, bok := figure(ds[i])
				if !aok || !bok || b == 0 {
					r.PerRound = nil
					break
				}
				r.PerRound = append(r.PerRound, a/b)
			}
		}
		if g.atLeast > 0 || g.atMost > 0 {
			met := (g.atLeast == 0 || r.Ratio >= g.atLeast) && (g.atMost == 0 || r.Ratio <= g.atMost)
			r.Met = &met
		}
		out = append(out, r)
	}
	return out
}

// goalsMarkdown renders the goals table of latest.md; names maps target
// ids to row labels.
func goalsMarkdown(b *strings.Builder, goals []goalResult, names map[string]string) {
	if len(goals) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Issue 7's marks\n\n")
	fmt.Fprintf(b, "Ratio of the two medians; per round, the same ratio in each round (the rounds' order as run).\n\n")
	fmt.Fprintf(b, "| ratio | of | asked | median ÷ median | per round | |\n")
	fmt.Fprintf(b, "|---|---|--:|--:|---|---|\n")
	for _, g := range goals {
		asked, verdict := "reported", ""
		switch {
		case g.AtLeast > 0:
			asked = fmt.Sprintf("≥ %.2f×", g.AtLeast)
		case g.AtMost > 0:
			asked = fmt.Sprintf("≤ %.2f×", g.AtMost)
		}
		if g.Met != nil {
			verdict = "met"
			if !*g.Met {
				verdict = "**not met**"
			}
		}
		rounds := make([]string, len(g.PerRound))
		for i, v := range g.PerRound {
			rounds[i] = fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(b, "| %s ÷ %s | %s | %s | %.3f× | %s | %s |\n",
			names[g.Num], names[g.Den], g.Measure, asked, g.Ratio, strings.Join(rounds, " "), verdict)
	}
}
