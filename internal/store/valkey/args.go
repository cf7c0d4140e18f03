package valkey

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// limitArgs is a limit's part of the script's ARGV (lua/dispatch.lua):
// kind, count, period, burst, delay, nodelay, as decimal strings.
type limitArgs [6]string

func formatLimit(l *algo.Limit) *limitArgs {
	noDelay := "0"
	if l.NoDelay {
		noDelay = "1"
	}
	return &limitArgs{
		strconv.Itoa(scriptKind(l)),
		strconv.FormatInt(l.Count, 10),
		strconv.FormatInt(l.Period, 10),
		strconv.FormatInt(l.Burst, 10),
		strconv.FormatInt(l.Delay, 10),
		noDelay,
	}
}

// maxCachedLimits bounds limitCache: a configuration has a few limits,
// but reloads may bring new ones; past the bound, limits are formatted
// per call (correct, only slower).
const maxCachedLimits = 1024

// limitCache keeps each limit's ARGV strings, so a decision formats no
// number that the configuration fixed (the request path then allocates no
// strings for them). Reads are a lock-free map lookup; a new limit copies
// the map under mu. The zero value is ready to use.
type limitCache struct {
	m  atomic.Pointer[map[algo.Limit]*limitArgs]
	mu sync.Mutex
}

func (c *limitCache) get(l *algo.Limit) *limitArgs {
	if m := c.m.Load(); m != nil {
		if a, ok := (*m)[*l]; ok {
			return a
		}
	}
	a := formatLimit(l)
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil && len(*old) >= maxCachedLimits {
		return a
	}
	m := make(map[algo.Limit]*limitArgs, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[*l] = a
	c.m.Store(&m)
	return a
}

func lenOf(m *map[algo.Limit]*limitArgs) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// scriptArgs fills b with KEYS and ARGV for checks in mode at now, for
// one request (lua/dispatch.lua: now, mode, n = 1, then argsPerCheck
// values per check; a batch raises n where it merges identical runs).
func (s *Store) scriptArgs(b *call, mode string, checks []store.Check, now int64) {
	b.keys = b.keys[:0]
	b.args = append(b.args[:0], strconv.FormatInt(now, 10), mode, "1")
	for i := range checks {
		ch := &checks[i]
		b.keys = append(b.keys, ch.Key)
		if ch.Limit.Calendar != nil {
			b.args = appendCalendar(b.args, ch, now)
			continue
		}
		la := s.limits.get(&ch.Limit)
		b.args = append(b.args, la[:]...)
		b.args = append(b.args, strconv.FormatInt(ch.Cost, 10), ch.Lease)
	}
}

// appendCalendar appends a calendar window's check (calendar_span in
// lua/prelude.lua): its script kind (scriptKind), Count, six consecutive
// period starts around now (Unix ms; 0, the server's TIME, is taken as
// this host's clock, which only has to lie within a period of the
// server's), then cost. The boundaries change with the period, so they
// are formatted per call, unlike limitCache's.
func appendCalendar(args []string, ch *store.Check, now int64) []string {
	if now == 0 {
		now = time.Now().UnixMilli()
	}
	l := &ch.Limit
	sp := l.Calendar.SpanAt(now)
	before, after := l.Calendar.SpanAt(sp.PrevStart), l.Calendar.SpanAt(sp.End)
	return append(args, strconv.Itoa(scriptKind(l)), strconv.FormatInt(l.Count, 10),
		strconv.FormatInt(before.PrevStart, 10), strconv.FormatInt(sp.PrevStart, 10),
		strconv.FormatInt(sp.Start, 10), strconv.FormatInt(sp.End, 10),
		strconv.FormatInt(ch.Cost, 10),
		strconv.FormatInt(sp.NextEnd, 10)+":"+strconv.FormatInt(after.NextEnd, 10))
}
