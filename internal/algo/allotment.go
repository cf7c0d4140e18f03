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
