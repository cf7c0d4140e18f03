package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// spread is a figure over rounds: its median, least and greatest value.
type spread struct{ median, min, max float64 }

// spreadOf summarises xs (at least one value); an even count's median is
// the mean of the two middle values.
func spreadOf(xs []float64) spread {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	m := s[n/2]
	if n%2 == 0 {
		m = (s[n/2-1] + s[n/2]) / 2
	}
	return spread{median: m, min: s[0], max: s[n-1]}
}

// figures returns decisions/s, p50 and p99 (in ms) of rs, each over rounds.
func figures(rs []result) (rate, p50, p99 spread) {
	var r, a, b []float64
	for _, x := range rs {
		r = append(r, x.rate)
		a = append(a, ms(x.p50))
		b = append(b, ms(x.p99))
	}
	return spreadOf(r), spreadOf(a), spreadOf(b)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// report is the markdown: the setup, medians with their spread, the ratio
// of the first service to the second, and every round.
func report(services []service, results [][]result, o options) string {
	var b strings.Builder
	b.WriteString("# Envoy RLS: rlproxy vs envoyproxy/ratelimit\n\n")
	fmt.Fprintf(&b, "%d callers on one gRPC connection, %d remote_address values, %v per service and round after a %v warm-up, "+
		"%d round(s) with the services' order alternating, one redis-server.", o.workers, o.keys, o.duration, o.warmup, o.rounds)
	if o.note != "" {
		b.WriteString(" " + o.note)
	}
	b.WriteString("\n\n| service | decisions/s median (min–max) | p50 ms median (min–max) | p99 ms median (min–max) | OK / calls, all rounds |\n|---|---|---|---|---|\n")
	var rates, p99s []spread
	for i, s := range services {
		rate, p50, p99 := figures(results[i])
		rates, p99s = append(rates, rate), append(p99s, p99)
		var ok, calls int64
		for _, r := range results[i] {
			ok, calls = ok+r.ok, calls+r.calls
		}
		fmt.Fprintf(&b, "| %s | %.0f (%.0f–%.0f) | %.2f (%.2f–%.2f) | %.2f (%.2f–%.2f) | %d / %d |\n", s.name,
			rate.median, rate.min, rate.max, p50.median, p50.min, p50.max, p99.median, p99.min, p99.max, ok, calls)
	}
	if len(services) == 2 {
		var per []string
		for r := range results[0] {
			per = append(per, fmt.Sprintf("%.2f", results[0][r].rate/results[1][r].rate))
		}
		fmt.Fprintf(&b, "\n%s ÷ %s: decisions/s %.2f× (medians; per round %s), p99 %.2f×.\n",
			services[0].name, services[1].name, rates[0].median/rates[1].median, strings.Join(per, ", "), p99s[0].median/p99s[1].median)
	}
	b.WriteString("\n| round | service | decisions/s | p50 | p99 | OK / calls |\n|--:|---|--:|--:|--:|---|\n")
	for r := range o.rounds {
		for i, s := range services {
			x := results[i][r]
			fmt.Fprintf(&b, "| %d | %s | %.0f | %v | %v | %d / %d |\n", r+1, s.name, x.rate, x.p50, x.p99, x.ok, x.calls)
		}
	}
	return b.String()
}
