package main

import (
	"strings"
	"testing"
	"time"
)

func TestSpreadOf(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want spread
	}{
		{[]float64{3, 1, 2}, spread{2, 1, 3}},
		{[]float64{4, 1, 3, 2}, spread{2.5, 1, 4}},
		{[]float64{7}, spread{7, 7, 7}},
	} {
		if got := spreadOf(c.in); got != c.want {
			t.Errorf("spreadOf(%v) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

// TestReport: medians, spreads and the ratio come from the right service
// and round.
func TestReport(t *testing.T) {
	svcs := []service{{"a", ""}, {"b", ""}}
	res := [][]result{
		{{rate: 1000, p50: time.Millisecond, p99: 4 * time.Millisecond, ok: 10, calls: 10}, {rate: 1200, p50: 2 * time.Millisecond, p99: 6 * time.Millisecond, ok: 12, calls: 12}, {rate: 900, p50: time.Millisecond, p99: 5 * time.Millisecond, ok: 9, calls: 9}},
		{{rate: 500, p50: 3 * time.Millisecond, p99: 10 * time.Millisecond, ok: 5, calls: 5}, {rate: 400, p50: 3 * time.Millisecond, p99: 8 * time.Millisecond, ok: 4, calls: 4}, {rate: 450, p50: 4 * time.Millisecond, p99: 20 * time.Millisecond, ok: 4, calls: 5}},
	}
	md := report(svcs, res, options{workers: 32, keys: 1000, duration: 10 * time.Second, warmup: time.Second, rounds: 3, note: "Pinned."})
	for _, want := range []string{
		"3 round(s) with the services' order alternating, one redis-server. Pinned.",
		"| a | 1000 (900–1200) | 1.00 (1.00–2.00) | 5.00 (4.00–6.00) | 31 / 31 |",
		"| b | 450 (400–500) | 3.00 (3.00–4.00) | 10.00 (8.00–20.00) | 13 / 14 |",
		"a ÷ b: decisions/s 2.22× (medians; per round 2.00, 3.00, 2.00), p99 0.50×.",
		"| 2 | b | 400 | 3ms | 8ms | 4 / 4 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
