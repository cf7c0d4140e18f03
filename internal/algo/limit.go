package algo

import (
	"errors"
	"fmt"
	"time"
)

// Bounds checked by Validate. They keep every intermediate value of the
// decision arithmetic below 2^53, so Lua (doubles) computes exactly what Go
// computes: the largest products are q·Period (q = Quota()) and sums of a few
// of them, all ≤ 4·MaxUnits < 2^50.
const (
	// MaxCount is the largest Count (requests).
	MaxCount = 1_000_000_000
	// MaxBurst is the largest Burst (requests).
	MaxBurst = 1_000_000_000
	// MaxPeriod is the longest Period: 366 days in ms.
	MaxPeriod = 366 * 24 * 3600 * 1000
	// MaxUnits bounds max(Count, Quota()+1)·Period (requests·ms): 2^47,
	// e.g. 1,000,000 requests per day or 10 per year.
	MaxUnits = 1 << 47
)

// String is the algorithm's name as `rlproxy compare` prints it ("fixed
// window", "sliding counter", …).
func (k Kind) String() string {
	switch k {
	case FixedWindow:
		return "fixed window"
	case SlidingLog:
		return "sliding log"
	case SlidingWindow:
		return "sliding counter"
	case TokenBucket:
		return "token bucket"
	case LeakyBucket:
		return "leaky bucket"
	case Concurrency:
		return "concurrency"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Quota is q of RateLimit-Policy (CONFIG-SPEC): requests accepted at one
// instant from idle. Token bucket: Burst; leaky bucket: Burst+1 (counting
// delayed ones); windows and Concurrency: Count.
func (l *Limit) Quota() int64 {
	switch l.Kind {
	case TokenBucket:
		return l.Burst
	case LeakyBucket:
		return l.Burst + 1
	}
	return l.Count
}

// WindowMillis is w of RateLimit-Policy in ms (headers round it up to whole
// seconds): for buckets the time to drain or refill q requests,
// ceil(q·Period/Count); for windows the window; for Concurrency the lease TTL.
func (l *Limit) WindowMillis() int64 {
	if l.Kind == TokenBucket || l.Kind == LeakyBucket {
		return ceilDiv(l.Quota()*l.Period, l.Count)
	}
	return l.Period
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
	var end int64 // Unix ms at which s is idle
	switch l.Kind {
	case LeakyBucket:
		if s.C == 0 {
			return 0
		}
		return ceilDiv(l.leakyLevel(s, now)+l.Period, l.Count)
	case TokenBucket:
		if s.C == 0 {
			return 0
		}
		return ceilDiv(l.Burst*l.Period-l.tokenLevel(s, now), l.Count)
	case FixedWindow:
		if s.B > 0 {
			end = (s.A + 1) * l.Period
		}
	case SlidingWindow:
		switch {
		case s.B > 0:
			end = (s.A + 2) * l.Period
		case s.C > 0:
			end = (s.A + 1) * l.Period
		}
	case SlidingLog:
		if n := len(s.Log); n > 0 {
			end = s.Log[n-1] + l.Period
		}
	case Concurrency:
		for _, ls := range s.Leases {
			end = max(end, ls.Expiry)
		}
	}
	return max(end-now, 0)
}

// IdleAfterCharge is IdleMillis (ms from now until idle) of the state that
// an accepted DecideLease or DecideInto with cost > 0 has just written, at
// the same now, read off its Decision d rather than recomputed: the memory
// store saves the two divisions of a bucket's IdleMillis on every charge.
// It is d.ResetAfter for every kind but the sliding window counter, whose
// charged count still weighs as prev for one window more: d.ResetAfter +
// Period. (Concurrency without a lease only peeks; the equality holds for
// that unchanged state too.) For anything else, e.g. a refused d, use
// IdleMillis.
func (l *Limit) IdleAfterCharge(d *Decision) int64 {
	if l.Kind == SlidingWindow {
		return d.ResetAfter + l.Period
	}
	return d.ResetAfter
}

// String describes the limit for logs and test failures, e.g.
// "leaky bucket 10 r/s (burst 20, nodelay)" or "fixed window 100 per 1h0m0s".
func (l *Limit) String() string {
	switch l.Kind {
	case TokenBucket:
		return fmt.Sprintf("%v %s (burst %d)", l.Kind, rateString(l.Count, l.Period), l.Burst)
	case LeakyBucket:
		mode := ""
		switch {
		case l.NoDelay:
			mode = ", nodelay"
		case l.Delay > 0:
			mode = fmt.Sprintf(", delay %d", l.Delay)
		}
		return fmt.Sprintf("%v %s (burst %d%s)", l.Kind, rateString(l.Count, l.Period), l.Burst, mode)
	case Concurrency:
		return fmt.Sprintf("%v %d (lease %v)", l.Kind, l.Count, time.Duration(l.Period)*time.Millisecond)
	}
	return fmt.Sprintf("%v %d per %v", l.Kind, l.Count, time.Duration(l.Period)*time.Millisecond)
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
	return fmt.Sprintf("%d r/%v", count, time.Duration(period)*time.Millisecond)
}

// Validate reports the first problem that makes l unusable: an unknown
// Kind, Count or Period out of range (rate > 0, CONFIG-SPEC), a token bucket
// burst < 1 (CONFIG-SPEC: no default), delay together with nodelay (nginx
// refuses it too), delay or nodelay on another kind, or a limit past the
// bounds that keep the arithmetic exact (MaxCount, MaxBurst, MaxPeriod,
// MaxUnits).
func (l *Limit) Validate() error {
	switch {
	case l.Kind < FixedWindow || l.Kind > Concurrency:
		return fmt.Errorf("unknown algorithm %d", l.Kind)
	case l.Count < 1 || l.Count > MaxCount:
		return fmt.Errorf("count %d: want 1..%d", l.Count, MaxCount)
	case l.Period < 1 || l.Period > MaxPeriod:
		return fmt.Errorf("period %d ms: want 1..%d", l.Period, MaxPeriod)
	case l.Burst < 0 || l.Burst > MaxBurst:
		return fmt.Errorf("burst %d: want 0..%d", l.Burst, MaxBurst)
	case l.Kind == TokenBucket && l.Burst < 1:
		return errors.New("token bucket burst must be at least 1")
	case l.Kind != TokenBucket && l.Kind != LeakyBucket && l.Burst != 0:
		return fmt.Errorf("burst applies to the buckets only, not %v", l.Kind)
	case l.Kind != LeakyBucket && (l.Delay != 0 || l.NoDelay):
		return fmt.Errorf("delay and nodelay apply to the leaky bucket only, not %v", l.Kind)
	case l.NoDelay && l.Delay != 0:
		return errors.New("delay and nodelay are mutually exclusive")
	case l.Delay < 0 || l.Delay > MaxBurst:
		return fmt.Errorf("delay %d: want 0..%d", l.Delay, MaxBurst)
	case max(l.Count, l.Quota()+1) > MaxUnits/l.Period:
		return fmt.Errorf("%v: count or burst times period exceeds %d (exact arithmetic)", l, int64(MaxUnits))
	}
	return nil
}
