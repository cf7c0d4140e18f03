package algo

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Bounds checked by Validate, per algorithm. They keep every intermediate
// value of the decision arithmetic below 2^53, so Lua (Redis 7.0 doubles)
// computes exactly what Go computes (docs/DESIGN.md "Decision arithmetic").
const (
	// MaxCount is the largest Count (requests) of the buckets and of
	// Concurrency.
	MaxCount = 1_000_000_000
	// MaxWindowCount is the largest Count of the fixed window and of the
	// sliding window counter: 10^12. The fixed window keeps a count and
	// never multiplies it by a period; the counter weighs its previous count
	// with an exact multiply-divide (mulDiv), so neither needs Count·Period.
	// Their counts stay below 2·MaxWindowCount (ForceCharge's cap) < 2^41.
	MaxWindowCount = 1_000_000_000_000
	// MaxLogCount is the largest Count of the sliding log: it stores one
	// entry per accepted request (≈ 120 B each on Redis 7.0, MEMORY USAGE
	// SAMPLES 0: 12 MB for one client at the limit; 8 B on the memory store).
	MaxLogCount = 100_000
	// MaxBurst is the largest Burst (requests) of the buckets, with MaxUnits.
	MaxBurst = 1_000_000_000_000
	// MaxPeriod is the longest Period: 366 days in ms.
	MaxPeriod = 366 * 24 * 3600 * 1000
	// MaxUnits bounds a bucket's max(Count, Quota()+1)·Period
	// (requests·ms): 2^50. A bucket's values are sums of at most three
	// such products (a debt, the level, a cost), all below 2^53: e.g. a
	// burst of 10^12 at 10^6 r/s, or of 10^6 at 1 r/d (8.64·10^13).
	MaxUnits = 1 << 50
)

// Quota is q of RateLimit-Policy (docs/CONTRACT.md): requests accepted at one
// instant from idle. Token bucket: Burst; leaky bucket: Burst+1 (counting
// delayed ones); windows and Concurrency: Count.
func (l *Limit) Quota() int64 {
	return kinds[l.Kind].Quota.quota(l)
}

// WindowMillis is w of RateLimit-Policy in ms (headers round it up to whole
// seconds): for buckets the time to drain or refill q requests,
// ceil(q·Period/Count); for windows the window; for Concurrency the lease TTL.
func (l *Limit) WindowMillis() int64 {
	if kinds[l.Kind].Bucket {
		return ceilDiv(l.Quota()*l.Period, l.Count)
	}
	return l.Period
}

// WindowMillisAt is WindowMillis at now (Unix ms): for a calendar window
// the length of the period containing now (a 23 h day, a 29-day
// February), else WindowMillis.
func (l *Limit) WindowMillisAt(now int64) int64 {
	if l.Calendar != nil {
		_, _, _, _, w, _ := l.window(now)
		return w
	}
	return l.WindowMillis()
}

// window is the window containing now: its state id (the epoch window
// number now/Period, or a calendar period's start in Unix ms), the ids of
// the windows before and after it, the ms elapsed in it, its length and
// the next one's (ms).
func (l *Limit) window(now int64) (id, prev, next, el, w, wn int64) {
	if l.Calendar != nil {
		return l.Calendar.window(now)
	}
	w = l.Period
	id = now / w
	return id, id - 1, id + 1, now - id*w, w, w
}

// windowEnd is the Unix ms at which the window n windows after the one of
// state id ends (n = 0: that window's own end).
func (l *Limit) windowEnd(id int64, n int) int64 {
	if c := l.Calendar; c != nil {
		for range n + 1 {
			id = c.SpanAt(id).End
		}
		return id
	}
	return (id + 1 + int64(n)) * l.Period
}

// IdleMillis is the time in ms from now until s is idle, 0 if it is idle
// already: a store may drop s once that time has passed (the memory store's
// expiry, Valkey's PEXPIRE, at least 1 ms there) without changing any later
// decision. Buckets: until empty/full, as ResetAfter; fixed window: the end
// of s's window; sliding window counter: the end of the window after s's,
// while its count still weighs as prev (the end of s's own window when only
// prev is non-zero); sliding log: the newest entry leaves; Concurrency: the
// latest lease expires.
func (l *Limit) IdleMillis(s *State, now int64) int64 {
	return max(l.run(opIdle, nil, s, now, 0, "")-now, 0)
}

// IdleAfterCharge is IdleMillis (ms from now until idle) of the state that
// an accepted DecideLease or DecideInto with cost > 0 has just written, at
// the same now, read off its Decision d rather than recomputed: the memory
// store saves the two divisions of a bucket's IdleMillis on every charge.
// It is d.ResetAfter for every kind but those whose charge still weighs
// in the next window (Algorithm.WeighsNext: the sliding window counter's
// count weighs as prev for one window more): d.ResetAfter + Period. (Concurrency without a lease only peeks; the equality holds for
// that unchanged state too.) For anything else, e.g. a refused d, use
// IdleMillis. A calendar counter's next period may be shorter than
// Period (the unit's longest): there the result is an upper bound.
func (l *Limit) IdleAfterCharge(d *Decision) int64 {
	if kinds[l.Kind].WeighsNext {
		return d.ResetAfter + l.Period
	}
	return d.ResetAfter
}

// String describes the limit for logs and test failures, e.g.
// "leaky bucket 10 r/s (burst 20, nodelay)" or "fixed window 100 per 1h".
func (l *Limit) String() string {
	return l.Kind.String() + " " + kinds[l.Kind].params(l)
}

// rateString writes count per period ms in nginx's units where one fits.
func rateString(count, period int64) string {
	switch period {
	case 1000:
		return fmt.Sprintf("%d r/s", count)
	case 60_000:
		return fmt.Sprintf("%d r/m", count)
	case 3_600_000:
		return fmt.Sprintf("%d r/h", count)
	case 86_400_000:
		return fmt.Sprintf("%d r/d", count)
	}
	return fmt.Sprintf("%d r/%v", count, FormatDuration(time.Duration(period)*time.Millisecond))
}

// Validate reports the first problem that makes l unusable: an unknown
// Kind, Count or Period out of range (rate > 0, docs/CONTRACT.md), a token bucket
// burst < 1 (docs/CONTRACT.md: no default), delay together with nodelay (nginx
// refuses it too), delay or nodelay on another kind, or a limit past the
// bounds that keep the arithmetic exact (MaxCount, MaxWindowCount,
// MaxLogCount, MaxBurst, MaxPeriod, MaxUnits); those errors name the
// largest value that fits.
func (l *Limit) Validate() error {
	a := Describe(l.Kind)
	switch {
	case a == nil:
		return fmt.Errorf("unknown algorithm %d", l.Kind)
	case l.Count < 1 || l.Count > a.MaxCount:
		return fmt.Errorf("count %d: want 1..%d for the %v", l.Count, a.MaxCount, l.Kind)
	case l.Period < 1 || l.Period > MaxPeriod:
		return fmt.Errorf("period %d ms: want 1..%d", l.Period, MaxPeriod)
	case l.Burst < 0 || l.Burst > MaxBurst:
		return fmt.Errorf("burst %d: want 0..%d", l.Burst, MaxBurst)
	case l.Burst < a.MinBurst:
		return fmt.Errorf("%v burst must be at least %d", l.Kind, a.MinBurst)
	case !a.Has("burst") && l.Burst != 0:
		return fmt.Errorf("burst applies to the buckets only, not %v", l.Kind)
	case !a.Has("delay") && (l.Delay != 0 || l.NoDelay):
		return fmt.Errorf("delay and nodelay apply to the leaky bucket only, not %v", l.Kind)
	case l.NoDelay && l.Delay != 0:
		return errors.New("delay and nodelay are mutually exclusive")
	case l.Delay < 0 || l.Delay > MaxBurst:
		return fmt.Errorf("delay %d: want 0..%d", l.Delay, MaxBurst)
	case l.Calendar != nil && !a.Has("calendar"):
		return fmt.Errorf("calendar periods apply to the fixed window and the sliding counter only, not %v", l.Kind)
	case l.Calendar != nil && (l.Calendar.Loc == nil || l.Calendar.Unit < Day || l.Calendar.Unit > Year || l.Period != l.Calendar.Unit.longest()):
		return fmt.Errorf("%v: a calendar needs a unit, a zone and Period %d ms (its longest period)", l, l.Calendar.Unit.longest())
	}
	if !a.Bucket {
		return nil
	}
	// The buckets count in units of Period per request.
	largest := MaxUnits/l.Period - (l.Quota() + 1 - l.Burst) // the largest burst at this period
	switch {
	case l.Count > MaxUnits/l.Period:
		return fmt.Errorf("%v: rate count times period exceeds 2^50 (exact arithmetic): at most %d per %v", l, int64(MaxUnits/l.Period), FormatDuration(time.Duration(l.Period)*time.Millisecond))
	case l.Burst > largest:
		return fmt.Errorf("%v: burst times period exceeds 2^50 (exact arithmetic): the largest burst at this rate is %d", l, largest)
	}
	return nil
}

// MaxCountFor is the largest Count Validate accepts for kind k:
// MaxWindowCount, MaxLogCount or MaxCount.
func MaxCountFor(k Kind) int64 {
	return kinds[k].MaxCount
}

// FormatDuration writes d as time.Duration.String does without its zero
// units: "24h" for 24h0m0s, "1h30m", "1m", "500ms", as an operator writes
// a window in the config file.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
