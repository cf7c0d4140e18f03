package policy

import (
	"testing"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/config"
)

// TestCalendarKeysAndWindow: a calendar window's key code names the kind
// and the unit, apart from the epoch window's (a reload switching window
// and calendar, or the unit, never reads the other's state; the state's
// window id, a period's start instant, keeps zones apart), and w follows
// the period: Berlin's 23 h day, then a 24 h one.
func TestCalendarKeysAndWindow(t *testing.T) {
	day, _ := algo.NewCalendar(algo.Day, "Europe/Berlin")
	month, _ := algo.NewCalendar(algo.Month, "UTC")
	for _, c := range []struct {
		l    algo.Limit
		code string
	}{
		{algo.Limit{Kind: algo.FixedWindow, Count: 1, Period: 86_400_000}, "fw"},
		{algo.Limit{Kind: algo.FixedWindow, Count: 1, Period: day.Longest(), Calendar: day}, "fcd"},
		{algo.Limit{Kind: algo.SlidingWindow, Count: 1, Period: month.Longest(), Calendar: month}, "scm"},
	} {
		if got := kindCode(&c.l); got != c.code {
			t.Errorf("%v: code %q, want %q", &c.l, got, c.code)
		}
	}
	p := &Policy{Policy: config.Policy{Limit: algo.Limit{Kind: algo.FixedWindow, Count: 1, Period: day.Longest(), Calendar: day}}}
	spring := time.Date(2027, 3, 28, 12, 0, 0, 0, day.Loc).UnixMilli()
	if w := p.WindowAt(spring); w != 82_800 {
		t.Errorf("w on the spring day %d, want 82800", w)
	}
	if w := p.WindowAt(spring + 86_400_000); w != 86_400 {
		t.Errorf("w the day after %d, want 86400", w)
	}
}
