package algo

// slidingWindow is the sliding window counter (Cloudflare 2017) on
// epoch-aligned windows of Period ms or calendar periods. State: A = the
// window's id (as the fixed window's), B = its count, C = the previous
// window's count.
var slidingWindow = Algorithm{
	Kind: SlidingWindow, Name: "sliding_window", Label: "sliding counter", Code: "sw", Listed: 5,
	Fields: []string{"limit", "window", "calendar", "timezone"}, Required: []string{"limit"},
	MaxCount: MaxWindowCount, WeighsNext: true, Slices: SliceCounter,
	params: windowParams,
}

// slidingWindowOp performs operation o of the sliding window counter (Limit.run).
func slidingWindowOp(o op, l *Limit, d *Decision, s *State, now, cost int64, lease string) int64 {
	switch o {
	case opDecide:
		slidingDecide(l, d, s, now, cost, lease)
	case opRefund:
		slidingRefund(l, s, now, cost, lease)
	case opCharge:
		slidingCharge(l, s, now, cost)
	case opIdle:
		return slidingIdle(l, s, now)
	}
	return 0
}

// slidingDecide decides the counter at now.
func slidingDecide(l *Limit, d *Decision, s *State, now, c int64, _ string) {
	w := l.Period
	cw := now / w
	pw, el, wn := cw-1, now-cw*w, w
	if l.Calendar != nil { // written out: l.window does not inline
		cw, pw, _, el, w, wn = l.Calendar.window(now)
	}
	curr, prev := slidingCounts(s, cw, pw)
	if l.slidingCount(d, curr, prev, el, w, wn, c) && c > 0 {
		s.A, s.B, s.C = cw, curr+c, prev
	}
}

// slidingCounts is s's count in the window of id cw and in the one before,
// of id pw.
func slidingCounts(s *State, cw, pw int64) (curr, prev int64) {
	switch s.A {
	case cw:
		return s.B, s.C
	case pw:
		return 0, s.B
	}
	return 0, 0
}

// slidingRefund is curr −= cost in now's window, or prev −= cost once the
// window moved on by one (floor 0).
func slidingRefund(l *Limit, s *State, now, cost int64, _ string) {
	switch cw, _, next, _, _, _ := l.window(now); s.A {
	case cw:
		s.B = max(s.B-cost, 0)
	case next:
		s.C = max(s.C-cost, 0)
	}
}

// slidingCharge is curr += cost in now's window, up to 2·Count.
func slidingCharge(l *Limit, s *State, now, c int64) {
	cw, pw, _, _, _, _ := l.window(now)
	curr, prev := slidingCounts(s, cw, pw)
	s.A, s.B, s.C = cw, min(curr+c, 2*l.Count), prev
}

// slidingIdle is the end of the window after s's while its count still
// weighs as prev, the end of s's own window when only prev is non-zero.
func slidingIdle(l *Limit, s *State, _ int64) int64 {
	switch {
	case s.B > 0:
		return l.windowEnd(s.A, 1)
	case s.C > 0:
		return l.windowEnd(s.A, 0)
	}
	return 0
}

// slidingCount decides the sliding window counter at el ms into a window
// of w ms followed by one of wn ms (they differ for calendar periods), with
// curr counted in this window and prev in the one before, and reports
// whether it accepted. The estimate prev·(w−el)/w + curr, taken before
// counting, must stay below Count: as prev·(w−el)/w + curr + c − 1 <
// Count with integers, floor(prev·(w−el)/w) < Count − curr − c + 1.
// mulDiv keeps that exact without forming Count·w.
func (l *Limit) slidingCount(d *Decision, curr, prev, el, w, wn, c int64) bool {
	floor, frac := mulDiv(prev, w-el, w)
	ceil := floor + boolInt(frac) // whole requests of prev still counted
	reset := w - el
	if floor+curr+c-1 < l.Count {
		*d = Decision{Allowed: true, Remaining: max(l.Count-curr-c-ceil, 0), ResetAfter: reset}
		return true
	}
	*d = Decision{Remaining: max(l.Count-curr-ceil, 0), RetryAfter: l.slidingRetry(el, w, wn, curr, prev, c), ResetAfter: reset}
	return false
}

// slidingRetry is the sliding window counter's ms until a refused request of
// cost c would be accepted, at el ms into the current window of w ms
// followed by one of wn ms.
func (l *Limit) slidingRetry(el, w, wn, curr, prev, c int64) int64 {
	// Later in this window: the first el' with prev·(w−el')/w < k, k =
	// Count − curr − c + 1, i.e. el' > (prev−k)·w/prev. Refused at el, so
	// prev ≥ k.
	if k := l.Count - curr - c + 1; k > 0 {
		q, _ := mulDiv(prev-k, w, prev)
		if e := q + 1; e < w {
			return e - el
		}
	}
	// In the next window prev' = curr, curr' = 0: the first e with
	// curr·(wn−e)/wn < k2 = Count − c + 1 (≥ 1 because c ≤ Count, so curr
	// = 0 always takes the first case).
	k2 := l.Count - c + 1
	e := int64(0)
	if curr >= k2 {
		q, _ := mulDiv(curr-k2, wn, curr)
		e = q + 1
	}
	if e < wn {
		return w - el + e
	}
	return w - el + wn
}
