package algo

import (
	"fmt"
	"time"
	_ "time/tzdata" // zones resolve on hosts without a zoneinfo database
)

// CalendarUnit is the length of a calendar period.
type CalendarUnit uint8

// The calendar units: periods start at 00:00 local time on a day, on a
// Monday (ISO 8601 weeks), on the 1st of a month, on January 1st.
const (
	Day CalendarUnit = iota + 1
	Week
	Month
	Year
)

// String is the unit as the `calendar:` field spells it.
func (u CalendarUnit) String() string {
	switch u {
	case Day:
		return "day"
	case Week:
		return "week"
	case Month:
		return "month"
	case Year:
		return "year"
	}
	return fmt.Sprintf("CalendarUnit(%d)", uint8(u))
}

// Longest is the calendar's longest period in ms (the Period of its
// algo.Limit).
func (c *Calendar) Longest() int64 { return c.Unit.longest() }

// longest is the unit's longest period in ms, daylight saving time
// included: a 25 h day, a week or month with an autumn change in it, a
// leap year (a year holds both changes).
func (u CalendarUnit) longest() int64 {
	const h = 3_600_000
	switch u {
	case Day:
		return 25 * h
	case Week:
		return 7*24*h + h
	case Month:
		return 31*24*h + h
	}
	return 366 * 24 * h
}

// Calendar makes a window limit count in calendar periods of a time zone
// instead of epoch-aligned windows of Period ms: boundaries follow the
// zone's wall clock, so a day may last 23 or 25 hours and a month 28 to 31
// days. Build it with NewCalendar.
type Calendar struct {
	Unit CalendarUnit
	// Loc is the zone whose wall clock sets the boundaries.
	Loc *time.Location
}

// NewCalendar returns the calendar of unit u in the IANA zone named tz
// ("" is UTC). Errors: an unknown zone (time.LoadLocation's).
func NewCalendar(u CalendarUnit, tz string) (*Calendar, error) {
	loc := time.UTC
	if tz != "" {
		var err error
		if loc, err = time.LoadLocation(tz); err != nil {
			return nil, err
		}
	}
	return &Calendar{Unit: u, Loc: loc}, nil
}

// Span is one calendar period and its neighbours, as Unix ms.
type Span struct {
	// PrevStart, Start, End and NextEnd: the previous period is
	// [PrevStart, Start), the current one [Start, End), the next one
	// [End, NextEnd).
	PrevStart, Start, End, NextEnd int64
}

// SpanAt returns the period containing now (Unix ms) and its neighbours.
func (c *Calendar) SpanAt(now int64) Span {
	s := c.floor(time.UnixMilli(now).In(c.Loc))
	if s.UnixMilli() > now { // a midnight that occurs twice: the earlier one
		s = c.add(s, -1)
	}
	e := c.add(s, 1)
	for e.UnixMilli() <= now { // a zone that skipped a whole day
		s, e = e, c.add(e, 1)
	}
	return Span{c.add(s, -1).UnixMilli(), s.UnixMilli(), e.UnixMilli(), c.add(e, 1).UnixMilli()}
}

// window is Limit.window for a calendar.
func (c *Calendar) window(now int64) (id, prev, next, el, w, wn int64) {
	sp := c.SpanAt(now)
	return sp.Start, sp.PrevStart, sp.End, now - sp.Start, sp.End - sp.Start, sp.NextEnd - sp.End
}

// floor is the start of the period containing the local time t.
func (c *Calendar) floor(t time.Time) time.Time {
	y, m, d := t.Date()
	switch c.Unit {
	case Week:
		d -= (int(t.Weekday()) + 6) % 7 // days since Monday
	case Month:
		d = 1
	case Year:
		m, d = time.January, 1
	}
	return time.Date(y, m, d, 0, 0, 0, 0, c.Loc)
}

// add is the start of the period n periods after the one starting at s.
// time.Date normalizes out-of-range days and months (the 32nd, month 13).
func (c *Calendar) add(s time.Time, n int) time.Time {
	y, m, d := s.Date()
	switch c.Unit {
	case Day:
		d += n
	case Week:
		d += 7 * n
	case Month:
		m += time.Month(n)
	case Year:
		y += n
	}
	return time.Date(y, m, d, 0, 0, 0, 0, c.Loc)
}

// String describes the calendar, e.g. "calendar month (Europe/Berlin)".
func (c *Calendar) String() string {
	return "calendar " + c.Unit.String() + " (" + c.Loc.String() + ")"
}
