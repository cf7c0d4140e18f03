package algo

import (
	"testing"
	"time"
)

// at parses an RFC 3339 instant into Unix ms.
func at(t *testing.T, s string) int64 {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UnixMilli()
}

func calendar(t *testing.T, u CalendarUnit, tz string) *Calendar {
	t.Helper()
	c, err := NewCalendar(u, tz)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCalendarPeriods: month ends (31, 30, 28 and 29 days), a year end,
// Europe/Berlin's spring (23 h) and autumn (25 h) days, a week boundary at
// Monday 00:00 local. A fixed window of 1 per period is charged at the
// instant: t (ResetAfter) and Retry-After are the ms to the period's end,
// w its length; at the end a new period starts.
func TestCalendarPeriods(t *testing.T) {
	for _, c := range []struct {
		name, tz   string
		unit       CalendarUnit
		at         string
		start, end string
		w          int64 // s
	}{
		{"31-day month", "UTC", Month, "2027-01-31T23:59:59.250Z", "2027-01-01T00:00:00Z", "2027-02-01T00:00:00Z", 31 * 86400},
		{"30-day month", "UTC", Month, "2027-04-30T12:00:00Z", "2027-04-01T00:00:00Z", "2027-05-01T00:00:00Z", 30 * 86400},
		{"28-day February", "UTC", Month, "2027-02-28T23:00:00Z", "2027-02-01T00:00:00Z", "2027-03-01T00:00:00Z", 28 * 86400},
		{"29-day February", "UTC", Month, "2028-02-29T23:59:59Z", "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z", 29 * 86400},
		{"year end", "UTC", Year, "2027-12-31T23:59:59.999Z", "2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z", 365 * 86400},
		{"leap year", "UTC", Year, "2028-07-01T00:00:00Z", "2028-01-01T00:00:00Z", "2029-01-01T00:00:00Z", 366 * 86400},
		{"Berlin month end", "Europe/Berlin", Month, "2027-01-31T23:30:00+01:00", "2027-01-01T00:00:00+01:00", "2027-02-01T00:00:00+01:00", 31 * 86400},
		{"Berlin spring day (23 h)", "Europe/Berlin", Day, "2027-03-28T03:00:00+02:00", "2027-03-28T00:00:00+01:00", "2027-03-29T00:00:00+02:00", 23 * 3600},
		{"Berlin autumn day (25 h)", "Europe/Berlin", Day, "2027-10-31T02:30:00+01:00", "2027-10-31T00:00:00+02:00", "2027-11-01T00:00:00+01:00", 25 * 3600},
		{"Berlin March (31 d − 1 h)", "Europe/Berlin", Month, "2027-03-15T00:00:00+01:00", "2027-03-01T00:00:00+01:00", "2027-04-01T00:00:00+02:00", 31*86400 - 3600},
		{"Berlin week to Monday 00:00", "Europe/Berlin", Week, "2027-03-28T23:59:59+02:00", "2027-03-22T00:00:00+01:00", "2027-03-29T00:00:00+02:00", 7*86400 - 3600},
		{"UTC week from Monday 00:00", "UTC", Week, "2027-03-29T00:00:00Z", "2027-03-29T00:00:00Z", "2027-04-05T00:00:00Z", 7 * 86400},
		{"New York day", "America/New_York", Day, "2027-03-14T12:00:00-04:00", "2027-03-14T00:00:00-05:00", "2027-03-15T00:00:00-04:00", 23 * 3600},
	} {
		t.Run(c.name, func(t *testing.T) {
			cal := calendar(t, c.unit, c.tz)
			now, start, end := at(t, c.at), at(t, c.start), at(t, c.end)
			sp := cal.SpanAt(now)
			if sp.Start != start || sp.End != end {
				t.Fatalf("SpanAt(%s) = [%s, %s), want [%s, %s)", c.at, time.UnixMilli(sp.Start), time.UnixMilli(sp.End), c.start, c.end)
			}
			if next := cal.SpanAt(end); next.Start != end || next.PrevStart != start || sp.NextEnd != next.End {
				t.Fatalf("next period %+v does not follow %+v", next, sp)
			}
			l := Limit{Kind: FixedWindow, Count: 1, Period: cal.Longest(), Calendar: cal}
			if err := l.Validate(); err != nil {
				t.Fatal(err)
			}
			if w := (l.WindowMillisAt(now) + 999) / 1000; w != c.w {
				t.Errorf("w = %d s, want %d", w, c.w)
			}
			var s State
			left := end - now
			if got, want := l.Decide(&s, now, 1), (Decision{Allowed: true, ResetAfter: left}); got != want {
				t.Errorf("first: %+v, want %+v", got, want)
			}
			if got, want := l.Decide(&s, now, 1), (Decision{RetryAfter: left, ResetAfter: left}); got != want {
				t.Errorf("second: %+v, want %+v", got, want)
			}
			if got, want := l.IdleMillis(&s, now), left; got != want {
				t.Errorf("IdleMillis %d, want %d", got, want)
			}
			if got, want := l.Decide(&s, end, 1), (Decision{Allowed: true, ResetAfter: sp.NextEnd - end}); got != want {
				t.Errorf("next period: %+v, want %+v", got, want)
			}
		})
	}
}

// TestCalendarSliding: the sliding counter on calendar periods weighs the
// previous period's count by the share of the CURRENT period's length not
// yet elapsed, (W−el)/W with W the current period's length, whatever the
// previous one's: a count of 100 in February (28 d) at March 1 (31 d)
// 00:00 weighs 100 and decays over 31 days; a count in Berlin's 23 h day
// over the following 24 h day; the 25 h day weighs the day before over
// 25 h. The retry times follow the same weight.
func TestCalendarSliding(t *testing.T) {
	const h = 3_600_000
	for _, c := range []struct {
		name, tz   string
		unit       CalendarUnit
		charge, at string // 100 charged at charge; a decision at at
		cost       int64
		w          int64 // current period's length (ms)
		el         int64 // ms into it
		first      Decision
	}{
		// March 1 00:00: prev weighs 100; a cost of 51 fits once it weighs
		// below 50, half of March's 31 days (not of February's 28) later.
		{"February into March", "UTC", Month, "2027-02-10T00:00:00Z", "2027-03-01T00:00:00Z", 51, 31 * 24 * h, 0,
			Decision{RetryAfter: 31*12*h + 1, ResetAfter: 31 * 24 * h}},
		// Half-way through March (15.5 d): prev weighs exactly 50.
		{"half of March", "UTC", Month, "2027-02-10T00:00:00Z", "2027-03-16T12:00:00Z", 1, 31 * 24 * h, 31 * 12 * h,
			Decision{Allowed: true, Remaining: 49, ResetAfter: 31 * 12 * h}},
		// The day after Berlin's 23 h day, 12 h in: prev weighs 50.
		{"after the 23 h day", "Europe/Berlin", Day, "2027-03-28T12:00:00+02:00", "2027-03-29T12:00:00+02:00", 1, 24 * h, 12 * h,
			Decision{Allowed: true, Remaining: 49, ResetAfter: 12 * h}},
		// Berlin's 25 h day, 10 h in: prev weighs 100·15/25 = 60.
		{"in the 25 h day", "Europe/Berlin", Day, "2027-10-30T12:00:00+02:00", "2027-10-31T09:00:00+01:00", 1, 25 * h, 10 * h,
			Decision{Allowed: true, Remaining: 39, ResetAfter: 15 * h}},
		// There a cost of 51 fits once prev weighs below 50: at 12.5 h of 25.
		{"retry in the 25 h day", "Europe/Berlin", Day, "2027-10-30T12:00:00+02:00", "2027-10-31T09:00:00+01:00", 51, 25 * h, 10 * h,
			Decision{Remaining: 40, RetryAfter: 5*h/2 + 1, ResetAfter: 15 * h}},
		// After the 23 h day, 12 h in, prev weighs 50: a cost of 51 waits
		// until it weighs below 50 (1 ms).
		{"retry after the 23 h day", "Europe/Berlin", Day, "2027-03-28T12:00:00+02:00", "2027-03-29T12:00:00+02:00", 51, 24 * h, 12 * h,
			Decision{Remaining: 50, RetryAfter: 1, ResetAfter: 12 * h}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cal := calendar(t, c.unit, c.tz)
			l := Limit{Kind: SlidingWindow, Count: 100, Period: cal.Longest(), Calendar: cal}
			var s State
			if d := l.Decide(&s, at(t, c.charge), 100); !d.Allowed {
				t.Fatalf("charge: %+v", d)
			}
			now := at(t, c.at)
			if w := l.WindowMillisAt(now); w != c.w {
				t.Fatalf("period length %d, want %d", w, c.w)
			}
			if got := l.Decide(&s, now, c.cost); got != c.first {
				t.Errorf("got %+v, want %+v", got, c.first)
			}
		})
	}
}

// TestCalendarValidate: only the windows take a calendar, with its
// longest period as Period.
func TestCalendarValidate(t *testing.T) {
	cal := calendar(t, Month, "Europe/Berlin")
	for _, c := range []struct {
		l    Limit
		want string
	}{
		{Limit{Kind: SlidingLog, Count: 1, Period: cal.Longest(), Calendar: cal}, "calendar periods apply to the fixed window and the sliding counter only, not sliding log"},
		{Limit{Kind: FixedWindow, Count: 1, Period: 1000, Calendar: cal}, "fixed window 1 per calendar month (Europe/Berlin): a calendar needs a unit, a zone and Period 2682000000 ms (its longest period)"},
		{Limit{Kind: SlidingWindow, Count: MaxWindowCount, Period: cal.Longest(), Calendar: cal}, ""},
	} {
		got := ""
		if err := c.l.Validate(); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%v: got %q, want %q", &c.l, got, c.want)
		}
	}
}
