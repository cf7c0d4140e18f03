// Package algo holds rlproxy's rate-limiting decision math: pure functions of
// (limit, state, now, cost) with no I/O and no clock of their own.
//
// It is the reference the Valkey Lua scripts are checked against: the same
// traffic must give the same decisions, to the millisecond. All arithmetic is
// integer (int64) so that Go and Lua (doubles, exact below 2^53) agree.
//
// Units: times are Unix milliseconds, durations milliseconds, counts requests.
// A rate is Count requests per Period milliseconds; the bucket algorithms keep
// their level in "units" where one request = Period units and the level moves
// by Count units per millisecond, so 3r/s drains exactly one request per
// 333⅓ ms with no rounding (nginx limit_req truncates to milli-requests/s).
package algo

// Limit is one policy's compiled limit. The zero value is not valid; build it
// with the config package, which validates every field.
type Limit struct {
	Kind Kind
	// Count is requests per Period: the rate for buckets, the limit for
	// windows, the in-flight maximum for Concurrency.
	Count int64
	// Period is milliseconds: the rate's period for buckets (1000 for r/s,
	// 60000 for r/m), the window length for windows, the lease TTL for Concurrency.
	Period int64
	// Burst is requests: the token bucket's capacity; for the leaky bucket the
	// nginx burst (excess requests accepted beyond the rate).
	Burst int64
	// Delay is nginx delay=N for the leaky bucket: the first Delay excess
	// requests are not delayed. Ignored when NoDelay.
	Delay int64
	// NoDelay is nginx nodelay: accepted excess is served at once.
	NoDelay bool
	// Calendar, when set (fixed window and sliding window counter only),
	// makes the windows calendar periods of a time zone; Period is then
	// the unit's longest period (a bound, e.g. for a store's expiry), and
	// each period's own length comes from Calendar.SpanAt.
	Calendar *Calendar
}

// Decision is the outcome of one check against one limit at one instant.
// Its fields map one-to-one onto response headers.
type Decision struct {
	// Allowed reports whether the request is accepted (possibly after Wait).
	Allowed bool
	// Remaining is whole requests that would still be accepted now: after
	// this request's charge when Allowed, without any charge otherwise.
	// Example: 4 after the first of 5 quick requests on a token bucket of 5.
	Remaining int64
	// RetryAfter is milliseconds until a request of the same cost would be
	// accepted; 0 when Allowed. Example: 1994 on a refusal that clears in ~2 s.
	RetryAfter int64
	// Wait is milliseconds the accepted request must wait before it is
	// served (leaky bucket in delay mode); 0 otherwise.
	Wait int64
	// ResetAfter is milliseconds until the limit is back to idle (bucket
	// full/empty, end of window, newest log entry gone).
	ResetAfter int64
}
