package algo

// docs/PRODUCT.md's reference experiment ("The reference experiment",
// reproduced exactly), shared by the algo tests and `rlproxy compare`.

// ReferenceBase is the experiment's base time B in Unix ms: round, so window
// edges fall on round numbers.
const ReferenceBase int64 = 1_000_000_000_000

// Pattern is one named traffic pattern: request arrival times in Unix ms,
// ascending, each request of cost 1.
type Pattern struct {
	Name  string // "edge", "steady" or "burst"
	Times []int64
}

// ReferencePatterns returns docs/PRODUCT.md's three traffic patterns, each to be
// run on fresh state: edge (10 requests at B+9,500+50·i and 10 at
// B+10,000+50·i), steady (180 requests at B+333·i, 3 r/s for 60 s) and burst
// after idle (30 requests at B+60,000+33·i).
func ReferencePatterns() []Pattern {
	edge := make([]int64, 0, 20)
	for _, start := range []int64{9_500, 10_000} {
		for i := range int64(10) {
			edge = append(edge, ReferenceBase+start+50*i)
		}
	}
	steady := make([]int64, 180)
	for i := range steady {
		steady[i] = ReferenceBase + 333*int64(i)
	}
	burst := make([]int64, 30)
	for i := range burst {
		burst[i] = ReferenceBase + 60_000 + 33*int64(i)
	}
	return []Pattern{{"edge", edge}, {"steady", steady}, {"burst", burst}}
}

// ReferenceLimits returns the experiment's limits (10 requests per 10 s) in
// docs/PRODUCT.md's column order: fixed window, sliding log, sliding counter (each
// 10 per 10 s), token bucket (burst 10, 1 r/s) and leaky bucket (capacity 10
// = nginx burst=9 in delay mode, 1 r/s). Kind.String gives the column label.
func ReferenceLimits() []Limit {
	return []Limit{
		{Kind: FixedWindow, Count: 10, Period: 10_000},
		{Kind: SlidingLog, Count: 10, Period: 10_000},
		{Kind: SlidingWindow, Count: 10, Period: 10_000},
		{Kind: TokenBucket, Count: 1, Period: 1_000, Burst: 10},
		{Kind: LeakyBucket, Count: 1, Period: 1_000, Burst: 9},
	}
}

// MostInWindow returns the largest number of the ascending times that fall
// in one closed interval [s, s+width] starting at one of them: docs/PRODUCT.md's
// "most requests reaching the upstream in any 1 s" with width 1000 ms and
// times = arrival + Wait of the accepted requests, sorted.
func MostInWindow(times []int64, width int64) int {
	most, j := 0, 0
	for i, s := range times {
		for j < len(times) && times[j] <= s+width {
			j++
		}
		most = max(most, j-i)
	}
	return most
}
