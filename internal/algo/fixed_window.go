package algo

import (
	"fmt"
	"time"
)

// fixedWindow counts Count requests per epoch-aligned window of Period ms,
// or per calendar period. State: A = the window's id (now/Period, or a
// calendar period's start in Unix ms), B = its count n (requests).
var fixedWindow = Algorithm{
	Kind: FixedWindow, Name: "fixed_window", Label: "fixed window", Code: "fw", Listed: 3,
	Fields: []string{"limit", "window", "calendar", "timezone"}, Required: []string{"limit"},
	MaxCount: MaxWindowCount, Slices: SliceWindow,
	params: windowParams,
}

// fixedWindowOp performs operation o of the fixed window (Limit.run).
func fixedWindowOp(o op, l *Limit, d *Decision, s *State, now, cost int64, lease string) int64 {
	switch o {
	case opDecide:
		fixedDecide(l, d, s, now, cost, lease)
	case opRefund:
		fixedRefund(l, s, now, cost, lease)
	case opCharge:
		fixedCharge(l, s, now, cost)
	case opIdle:
		return fixedIdle(l, s, now)
	}
	return 0
}

// fixedDecide is the fixed window: accepted while n + cost ≤ Count.
func fixedDecide(l *Limit, d *Decision, s *State, now, c int64, _ string) {
	w := l.Period
	cw := now / w
	el := now - cw*w
	if l.Calendar != nil { // written out: l.window does not inline
		cw, _, _, el, w, _ = l.Calendar.window(now)
	}
	n := fixedCount(s, cw)
	reset := w - el
	if n+c > l.Count {
		*d = Decision{Remaining: max(l.Count-n, 0), RetryAfter: reset, ResetAfter: reset}
		return
	}
	if c > 0 {
		s.A, s.B = cw, n+c
	}
	*d = Decision{Allowed: true, Remaining: l.Count - n - c, ResetAfter: reset}
}

// fixedCount is the count of s in the window of id cw (0 once s's window
// has passed).
func fixedCount(s *State, cw int64) int64 {
	if s.A == cw {
		return s.B
	}
	return 0
}

// fixedRefund is n −= cost if s is still in now's window (floor 0).
func fixedRefund(l *Limit, s *State, now, cost int64, _ string) {
	if cw, _, _, _, _, _ := l.window(now); s.A == cw {
		s.B = max(s.B-cost, 0)
	}
}

// fixedCharge is n += cost in now's window, up to 2·Count.
func fixedCharge(l *Limit, s *State, now, c int64) {
	cw, _, _, _, _, _ := l.window(now)
	s.A, s.B = cw, min(fixedCount(s, cw)+c, 2*l.Count)
}

// fixedIdle is the end of s's window (s is idle once it has passed).
func fixedIdle(l *Limit, s *State, _ int64) int64 {
	if s.B > 0 {
		return l.windowEnd(s.A, 0)
	}
	return 0
}

// windowParams is a window limit's description after its label: "100
// per 1h", "100 per calendar month (UTC)".
func windowParams(l *Limit) string {
	if l.Calendar != nil {
		return fmt.Sprintf("%d per %v", l.Count, l.Calendar)
	}
	return fmt.Sprintf("%d per %v", l.Count, FormatDuration(time.Duration(l.Period)*time.Millisecond))
}
