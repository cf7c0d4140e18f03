package main

import (
	"fmt"
	"strings"
)

// goal is one of the throughput marks on a run's medians: the full-load req/s of
// target num ÷ that of target den (or, with halfP99, the p99 latency that
// num adds at half load ÷ what den adds), against a bound. A bound of 0
// reports the ratio only.
type goal struct {
	num, den string // target ids
	halfP99  bool   // half-load p99 added over direct, not full-load req/s
	atLeast  float64
	atMost   float64
}

// issueGoals are the throughput pass marks (bench/README.md; the
// half-load mark for both stores), plus the 10k-client pair, reported
// without a mark, and the pool and access-log marks: the access log costs at most 10 % of
// req/s, a one-server pool no more than 5 % against `url`; Valkey with allotments ≥ 0.85×
// memory as without, and the default engine against std and against the fasthttp
// ceiling (ratios only).
func issueGoals() []goal {
	return []goal{
		{num: "rlproxy_memory", den: "minproxy", atLeast: 0.95},
		{num: "rlproxy_memory", den: "caddy", atLeast: 1.1},
		{num: "rlproxy_memory", den: baselineID, atLeast: 0.4},
		{num: "rlproxy_valkey", den: "rlproxy_memory", atLeast: 0.85},
		{num: "rlproxy_valkey_keys", den: "rlproxy_memory_keys"},
		{num: "rlproxy_memory", den: baselineID, halfP99: true, atMost: 2},
		{num: "rlproxy_valkey", den: baselineID, halfP99: true, atMost: 2},
		{num: "rlproxy_accesslog", den: "rlproxy", atLeast: 0.90},
		{num: "rlproxy_pool1", den: "rlproxy", atLeast: 0.95},
		{num: "rlproxy_valkey_allot", den: "rlproxy_memory", atLeast: 0.85},
		{num: "rlproxy_memory", den: "rlproxy_memory_std"},
		{num: "rlproxy_memory", den: "ceiling"},
	}
}

// abGoals are the A/B marks of a run with a base build: each rlproxy row's
// req/s ÷ its base twin's, which must stay within 5 % (no measurable
// regression, as the issues that touch the request path ask).
func abGoals(results []*targetResult) []goal {
	var out []goal
	for _, r := range results {
		if id, ok := strings.CutSuffix(r.ID, baseSuffix); ok {
			out = append(out, goal{num: id, den: r.ID, atLeast: 0.95})
		}
	}
	return out
}

// goalResult is a goal's outcome in one run (latest.json "goals").
type goalResult struct {
	Num     string  `json:"num"`
	Den     string  `json:"den"`
	Measure string  `json:"measure"` // "req/s" or "half-load p99 added"
	AtLeast float64 `json:"at_least,omitempty"`
	AtMost  float64 `json:"at_most,omitempty"`
	// Ratio divides num's median by den's (0 when not measured);
	// PerRound divides round by round, over the rounds both targets
	// completed (a failed target is not measured again, so its runs are
	// the first rounds).
	Ratio    float64   `json:"ratio"`
	PerRound []float64 `json:"per_round,omitempty"`
	// Met is nil for a goal without a bound, and when Note says why there
	// is no verdict.
	Met *bool `json:"met,omitempty"`
	// Note is empty for a complete measurement, else what is missing: a
	// target not measured or failed before the last round, no figure to
	// divide by (e.g. no upstream-direct run for the added latency).
	Note string `json:"note,omitempty"`
}

// evalGoals returns the outcome of every goal: a ratio and a verdict where
// both targets were measured in every round, a note saying what is
// missing otherwise.
func evalGoals(results []*targetResult, goals []goal) []goalResult {
	byID := map[string]*targetResult{}
	rounds := 0
	for _, r := range results {
		byID[r.ID] = r
		rounds = max(rounds, len(r.Full))
	}
	out := make([]goalResult, 0, len(goals))
	for _, g := range goals {
		r := goalResult{Num: g.num, Den: g.den, Measure: "req/s", AtLeast: g.atLeast, AtMost: g.atMost}
		if g.halfP99 {
			r.Measure = "half-load p99 added"
		}
		r.Note = r.eval(g, byID[g.num], byID[g.den], rounds)
		if r.Note == "" && !g.halfP99 {
			r.Note = loadBoundNote(byID[g.num], byID[g.den])
		}
		if r.Note == "" && (g.atLeast > 0 || g.atMost > 0) {
			met := (g.atLeast == 0 || r.Ratio >= g.atLeast) && (g.atMost == 0 || r.Ratio <= g.atMost)
			r.Met = &met
		}
		out = append(out, r)
	}
	return out
}

// eval sets r's ratios for goal g of targets n and d over a run of rounds
// full-load rounds, and returns what keeps it from a verdict ("" for
// nothing).
func (r *goalResult) eval(g goal, n, d *targetResult, rounds int) string {
	for _, t := range []*targetResult{n, d} {
		if t == nil || len(t.Full) == 0 {
			return "not measured"
		}
	}
	ns, ds := n.Full, d.Full
	figure := func(s sample) (float64, bool) { return s.RPS, true }
	if g.halfP99 {
		ns, ds = n.Half, d.Half
		figure = func(s sample) (float64, bool) {
			if s.AddedP99us == nil {
				return 0, false
			}
			return *s.AddedP99us, true
		}
	}
	// A ratio needs a positive divisor: p99 added over direct can come out
	// at or below zero in a noisy round.
	shared := min(len(ns), len(ds))
	for i := range shared {
		a, aok := figure(ns[i])
		b, bok := figure(ds[i])
		if !aok || !bok || b <= 0 {
			r.PerRound = nil
			break
		}
		r.PerRound = append(r.PerRound, a/b)
	}
	if len(ns) == 0 || len(ds) == 0 {
		return "not measured"
	}
	nm, nok := figure(*medianSample(ns))
	dm, dok := figure(*medianSample(ds))
	switch {
	case !nok || !dok:
		return "no figure (no upstream-direct run in a round)"
	case dm <= 0:
		return fmt.Sprintf("no ratio: the divisor's median is %.0f", dm)
	}
	r.Ratio = nm / dm
	if len(ns) < rounds || len(ds) < rounds {
		return fmt.Sprintf("%d and %d of %d rounds (a target failed)", len(ns), len(ds), rounds)
	}
	return ""
}

// loadBoundNote names the rows among rs whose full-load runs did not keep
// the proxy's CPU busy (boundCheck): their req/s is a lower bound, so a
// ratio with them is no mark. "" when there is none.
func loadBoundNote(rs ...*targetResult) string {
	var bound []string
	for _, r := range rs {
		if r != nil && r.Bound != nil && r.Bound.LoadBound {
			bound = append(bound, fmt.Sprintf("%s %.1f %%", r.Name, r.Bound.BusyPct))
		}
	}
	if len(bound) == 0 {
		return ""
	}
	return "no mark: load-bound (" + strings.Join(bound, ", ") + " busy, under " + fmt.Sprint(minProxyBusyPct) + " %)"
}

// goalsMarkdown renders the goals table of latest.md; names maps target
// ids to row labels.
func goalsMarkdown(b *strings.Builder, goals []goalResult, names map[string]string) {
	if len(goals) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Pass marks\n\n")
	fmt.Fprintf(b, "The verdict is on the ratio of the two medians; per round is the same ratio in each round, for the spread.\n\n")
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
		ratio := "–"
		if g.Ratio != 0 {
			ratio = fmt.Sprintf("%.3f×", g.Ratio)
		}
		if g.Note != "" {
			verdict = g.Note
		}
		rounds := make([]string, len(g.PerRound))
		for i, v := range g.PerRound {
			rounds[i] = fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(b, "| %s ÷ %s | %s | %s | %s | %s | %s |\n",
			label(names, g.Num), label(names, g.Den), g.Measure, asked, ratio, strings.Join(rounds, " "), verdict)
	}
}

// label is id's row label in names, or id itself for a target the run did
// not include.
func label(names map[string]string, id string) string {
	if n, ok := names[id]; ok {
		return n
	}
	return id
}
