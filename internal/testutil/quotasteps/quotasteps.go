// Package quotasteps holds step tables at fixed instants for limits at the
// sizes that paid API plans use (issue "Quotas as APIs sell them"): ten
// million a day, a million a month, 10^12 a day, a sliding counter of ten
// million per 30 days, token buckets of 10^12 at 10^6 r/s and 10^6 at 1 r/d.
// One table is run by the algo tests, the memory store's and the Valkey
// store's (the Lua scripts), so all three agree to the millisecond. Each
// table reaches its limit with a large cost and then shows that the last
// request admitted is exactly the limit-th.
package quotasteps

import "rlproxy/internal/algo"

// Step is one decision at Start+At (Unix ms) of Cost requests and its exact
// expected decision.
type Step struct {
	At, Cost int64
	Want     algo.Decision
}

// Case is one limit's table, run in order on one fresh state.
type Case struct {
	Name  string
	Limit algo.Limit
	// Start is the Unix ms the steps' At count from: a multiple of the
	// window for the windows (a window starts there).
	Start int64
	Steps []Step
}

const (
	day   = 86_400_000
	month = 30 * day // 720 h
	year  = 365 * day
)

func d(allowed bool, remaining, retry, reset int64) algo.Decision {
	return algo.Decision{Allowed: allowed, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

// fixed is the table of a fixed window of count per w ms: count−1 at
// once, the count-th a second later, refusals until the window's last ms,
// and a new window.
func fixed(name string, count, w, start int64) Case {
	return Case{name, algo.Limit{Kind: algo.FixedWindow, Count: count, Period: w}, start, []Step{
		{0, count - 1, d(true, 1, 0, w)},
		{1000, 1, d(true, 0, 0, w-1000)}, // the limit-th
		{2000, 1, d(false, 0, w-2000, w-2000)},
		{w - 1, 1, d(false, 0, 1, 1)},
		{w, count + 1, d(false, count, 0, w)}, // more than the limit: never
		{w, 1, d(true, count-1, 0, w)},
	}}
}

// Cases returns the tables.
func Cases() []Case {
	return []Case{
		fixed("fixed window 10^7 per day", 10_000_000, day, 20_000*day),
		fixed("fixed window 10^6 per 720h", 1_000_000, month, 700*month),
		fixed("fixed window 10^5 per 8760h", 100_000, year, 57*year),
		fixed("fixed window 10^12 per day", 1_000_000_000_000, day, 20_000*day),
		{"sliding counter 10^7 per 30 days", algo.Limit{Kind: algo.SlidingWindow, Count: 10_000_000, Period: month}, 700 * month, []Step{
			{0, 9_999_999, d(true, 1, 0, month)},
			{1000, 1, d(true, 0, 0, month-1000)}, // the limit-th
			// Full: the first ms of the next window weighs 10^7·(W−1)/W < 10^7.
			{2000, 1, d(false, 0, month-2000+1, month-2000)},
			// Half-way through the next window, prev weighs exactly 5·10^6
			// (10^7·1.296·10^9 > 2^53: the multiply-divide's long path).
			{month + month/2, 5_000_000, d(true, 0, 0, month/2)},
			{month + month/2, 1, d(false, 0, 1, month/2)},
			// One ms later prev weighs 4,999,999.996: 4,999,999 whole.
			{month + month/2 + 1, 1, d(true, 0, 0, month/2-1)},
			{month + month/2 + 1, 1, d(false, 0, 259, month/2-1)},
		}},
		{"token bucket 10^12 at 10^6 r/s", algo.Limit{Kind: algo.TokenBucket, Count: 1_000_000, Period: 1000, Burst: 1_000_000_000_000}, 1_000_000_000_000, []Step{
			{0, 999_999_999_999, d(true, 1, 0, 1_000_000_000)},
			{0, 1, d(true, 0, 0, 1_000_000_000)}, // the limit-th
			{0, 1, d(false, 0, 1, 1_000_000_000)},
			{1, 1, d(true, 999, 0, 1_000_000_000)}, // 1 ms refills 1000
			{1, 1_000_000_000_000, d(false, 999, 1_000_000_000, 1_000_000_000)},
		}},
		{"token bucket 10^6 at 1 r/d", algo.Limit{Kind: algo.TokenBucket, Count: 1, Period: day, Burst: 1_000_000}, 1_000_000_000_000, []Step{
			{0, 999_999, d(true, 1, 0, 1_000_000*day-day)},
			{0, 1, d(true, 0, 0, 1_000_000*day)}, // the limit-th
			{1000, 1, d(false, 0, day-1000, 1_000_000*day-1000)},
			{day, 1, d(true, 0, 0, 1_000_000*day)},
		}},
	}
}
