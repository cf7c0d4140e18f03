package algo

// AllotmentRefusal is why allotments (package allotment) cannot keep l's
// stated bound, "" when they can: its algorithm's NoSlice, or for a
// limit whose algorithm slices, nothing.
func (l *Limit) AllotmentRefusal() string {
	a := Describe(l.Kind)
	if a == nil {
		return "unknown algorithm"
	}
	if a.Slices == SliceNone {
		return a.NoSlice
	}
	return ""
}

// WindowEnd is the Unix ms at which the window containing now ends: the
// epoch window's or the calendar period's end. It means nothing for the
// algorithms that are not windows.
func (l *Limit) WindowEnd(now int64) int64 {
	id, _, _, _, _, _ := l.window(now)
	return l.windowEnd(id, 0)
}
