package config

import (
	"rlproxy/internal/algo"
)

// calendarUnits are the `calendar:` values, in algo.CalendarUnit order.
var calendarUnits = [...]string{"day", "week", "month", "year"}

// windowOrCalendar decodes a window algorithm's limit with either a
// `window:` (epoch-aligned windows, decoder.window) or a `calendar:` unit
// and an optional `timezone:` (an IANA name, default UTC), which only the
// fixed window and the sliding window counter take (the algorithms'
// field lists say so). A calendar limit's Period is its unit's longest
// period (algo.Limit.Calendar).
func (d *decoder) windowOrCalendar(o object, a *algo.Algorithm) (algo.Limit, bool) {
	cn, tn := o.get("calendar"), o.get("timezone")
	if !a.Has("calendar") { // policy reports the fields
		return d.window(o, a, "window", 0)
	}
	if cn == nil {
		if tn != nil {
			d.errorf(tn, o.field("timezone"), "applies only with calendar: day, week, month or year")
			return algo.Limit{Kind: a.Kind}, false
		}
		return d.window(o, a, "window", 0)
	}
	ok := true
	if o.has("window") {
		d.errorf(o.get("window"), o.field("window"), "set window or calendar, not both")
		ok = false
	}
	unit, good := d.oneOf(cn, o.field("calendar"), calendarUnits[:]...)
	ok = ok && good
	tz := ""
	if tn != nil {
		tz, good = d.str(tn, o.field("timezone"))
		ok = ok && good
	}
	l := algo.Limit{Kind: a.Kind}
	if n := o.get("limit"); n != nil {
		l.Count, good = d.integer(n, o.field("limit"), 1, algo.MaxCountFor(a.Kind))
		ok = ok && good
	} else {
		d.errorf(o.missing(), o.field("limit"), "required for %s: requests per %s, at least 1", a.Name, "calendar period")
		ok = false
	}
	if !ok {
		return l, false
	}
	u := algo.CalendarUnit(1)
	for unit != calendarUnits[u-1] {
		u++
	}
	cal, err := algo.NewCalendar(u, tz)
	if err != nil {
		d.errorf(tn, o.field("timezone"), "%q: unknown time zone; want an IANA name such as Europe/Berlin or UTC", tz)
		return l, false
	}
	l.Calendar, l.Period = cal, cal.Longest()
	return l, true
}
