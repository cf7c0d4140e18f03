package algo

import "slices"

// slidingLog keeps every accepted request's Unix ms for Period ms, in
// State.Log (ascending; requests in one ms share a value).
var slidingLog = Algorithm{
	Kind: SlidingLog, Name: "sliding_log", Label: "sliding log", Code: "sl", Listed: 4,
	Fields: []string{"limit", "window"}, Required: []string{"limit", "window"},
	MaxCount: MaxLogCount, Var: true,
	NoSlice: "its entries are request times, not units: a slice spent locally would enter the log at other times than it was charged",
	params:  windowParams,
}

// slidingLogOp performs operation o of the sliding log (Limit.run).
func slidingLogOp(o op, l *Limit, d *Decision, s *State, now, cost int64, lease string) int64 {
	switch o {
	case opDecide:
		logDecide(l, d, s, now, cost, lease)
	case opRefund:
		logRefund(l, s, now, cost, lease)
	case opCharge:
		logCharge(l, s, now, cost)
	case opIdle:
		return logIdle(l, s, now)
	}
	return 0
}

// logDecide accepts while the live entries plus cost stay within Count.
func logDecide(l *Limit, d *Decision, s *State, now, c int64, _ string) {
	w := l.Period
	live := logLive(s, now, w)
	n := int64(len(live))
	reset := int64(0)
	if n > 0 {
		reset = live[n-1] + w - now
	}
	if n+c > l.Count {
		k := n + c - l.Count
		*d = Decision{Remaining: max(l.Count-n, 0), RetryAfter: live[k-1] + w - now, ResetAfter: reset}
		return
	}
	if c > 0 {
		s.Log = insertTimes(live, now, c)
		reset = s.Log[len(s.Log)-1] + w - now
	}
	*d = Decision{Allowed: true, Remaining: l.Count - n - c, ResetAfter: reset}
}

// logLive is the entries of s still in the window of w ms ending at now:
// those t > now − w.
func logLive(s *State, now, w int64) []int64 {
	return s.Log[countLE(s.Log, now-w):]
}

// logRefund drops cost entries at exactly now (they are indistinguishable).
func logRefund(_ *Limit, s *State, now, cost int64, _ string) {
	hi := countLE(s.Log, now)
	lo := countLE(s.Log, now-1)
	n := min(int64(hi-lo), cost)
	if n == 0 {
		return
	}
	out := make([]int64, 0, int64(len(s.Log))-n)
	out = append(out, s.Log[:hi-int(n)]...)
	out = append(out, s.Log[hi:]...)
	if len(out) == 0 {
		out = nil
	}
	s.Log = out
}

// logCharge adds cost entries at now, up to Count live entries (the log's
// memory stays bounded by the limit).
func logCharge(l *Limit, s *State, now, c int64) {
	live := logLive(s, now, l.Period)
	if n := min(c, l.Count-int64(len(live))); n > 0 {
		s.Log = insertTimes(live, now, n)
	} else {
		s.Log = live
	}
}

// logIdle is when the newest entry leaves.
func logIdle(l *Limit, s *State, _ int64) int64 {
	if n := len(s.Log); n > 0 {
		return s.Log[n-1] + l.Period
	}
	return 0
}

// countLE is the number of entries of the ascending log that are ≤ t.
func countLE(log []int64, t int64) int {
	i, _ := slices.BinarySearch(log, t+1)
	return i
}

// insertTimes returns the ascending log with c entries at now added. It
// appends in place when now is the newest time (the common case) and copies
// otherwise, so it never changes an element the caller can see.
func insertTimes(log []int64, now, c int64) []int64 {
	i := countLE(log, now)
	if i == len(log) {
		for range c {
			log = append(log, now)
		}
		return log
	}
	out := make([]int64, 0, int64(len(log))+c)
	out = append(out, log[:i]...)
	for range c {
		out = append(out, now)
	}
	return append(out, log[i:]...)
}
