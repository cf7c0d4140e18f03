package algo

import "testing"

// BenchmarkDecideInto is the memory store's per-check arithmetic, per
// algorithm, on one state with requests 7 ms apart (some refused); the
// calendar variants show what a calendar window adds (zone arithmetic).
func BenchmarkDecideInto(b *testing.B) {
	limits := []Limit{
		{Kind: FixedWindow, Count: 100, Period: 60_000},
		{Kind: SlidingWindow, Count: 100, Period: 60_000},
		{Kind: SlidingWindow, Count: 10_000_000, Period: 30 * 86_400_000},
		{Kind: TokenBucket, Count: 10, Period: 1000, Burst: 20},
		{Kind: LeakyBucket, Count: 10, Period: 1000, Burst: 20},
	}
	names := []string{"fixed", "sliding", "sliding-big", "token", "leaky"}
	if cal, err := NewCalendar(Month, "Europe/Berlin"); err == nil {
		limits = append(limits, Limit{Kind: FixedWindow, Count: 100, Period: cal.Longest(), Calendar: cal})
		names = append(names, "fixed-calendar")
	}
	for i, l := range limits {
		b.Run(names[i], func(b *testing.B) {
			var s State
			var d Decision
			now := ReferenceBase
			b.ReportAllocs()
			for b.Loop() {
				now += 7
				l.DecideInto(&d, &s, now, 1, "")
			}
		})
	}
}
