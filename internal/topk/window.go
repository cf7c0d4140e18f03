package topk

import (
	"hash/maphash"
	"slices"
	"sync"
	"time"
)

// Window counts ids over a sliding span of time as a ring of Sketches, one
// per step (e.g. 6 steps of 10 s: the last minute), merged when read. A
// step's sketch is emptied when the ring comes round to it, so memory is
// steps·k counters, fixed at NewWindow. Safe for concurrent use.
//
// Bounds of a merged Entry (true count c over the steps still in the
// window): Count−Err ≤ c ≤ Count, where Err sums each step's error (at
// most that step's additions / k) and, for a step whose sketch does not
// hold the id, that step's Min. Err ≤ N/k for N additions in the window.
type Window struct {
	mu    sync.Mutex
	step  int64 // ms
	ring  []bucket
	merge map[string]*Entry // scratch for Top, reused
}

type bucket struct {
	epoch int64 // unix ms / step; -1 = never used
	s     *Sketch
}

// Entry is one id in a Window's answer.
type Entry struct {
	ID string `json:"id"`
	// Count is an upper bound on the id's additions in the window; Err how
	// far above the true count it may be (Count−Err is a lower bound).
	Count uint64 `json:"count"`
	Err   uint64 `json:"error"`
}

// NewWindow returns a Window of steps sketches of k counters, each
// covering step of time (≥ 1 ms): it answers for the last steps·step,
// the current, partial step included (so between (steps−1)·step and
// steps·step of history).
func NewWindow(k, steps int, step time.Duration) *Window {
	w := &Window{step: max(step.Milliseconds(), 1), ring: make([]bucket, max(steps, 1))}
	for i := range w.ring {
		w.ring[i] = bucket{epoch: -1, s: NewSketch(k)}
	}
	return w
}

// Add counts one occurrence of id at now. It does not allocate.
func (w *Window) Add(now time.Time, id string) {
	e := now.UnixMilli() / w.step
	w.mu.Lock()
	b := &w.ring[int(e%int64(len(w.ring)))]
	if b.epoch != e {
		b.epoch = e
		b.s.Reset()
	}
	b.s.Add(id)
	w.mu.Unlock()
}

// Top returns the n ids with the largest counts in the window ending at
// now, largest first (ties by id), and N, the additions in the window.
func (w *Window) Top(now time.Time, n int) (top []Entry, total uint64) {
	e := now.UnixMilli() / w.step
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.merge == nil {
		w.merge = make(map[string]*Entry)
	}
	clear(w.merge)
	var live []*Sketch
	for i := range w.ring {
		b := &w.ring[i]
		if b.epoch >= 0 && b.epoch > e-int64(len(w.ring)) && b.epoch <= e {
			live = append(live, b.s)
		}
	}
	for _, s := range live {
		total += s.Total()
		s.Each(func(id string, count, err uint64) {
			m := w.merge[id]
			if m == nil {
				m = &Entry{ID: id}
				w.merge[id] = m
			}
			m.Count += count
			m.Err += err
		})
	}
	for _, m := range w.merge {
		for _, s := range live {
			if min := s.Min(); min > 0 && !s.has(m.ID) {
				m.Count += min
				m.Err += min
			}
		}
		top = append(top, *m)
	}
	slices.SortFunc(top, func(a, b Entry) int {
		if a.Count != b.Count {
			if a.Count > b.Count {
				return -1
			}
			return 1
		}
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	if len(top) > n {
		top = top[:n]
	}
	return top, total
}

// has reports whether id is counted in s.
func (s *Sketch) has(id string) bool {
	if len(id) > MaxIDLen {
		id = id[:MaxIDLen]
	}
	_, ok := s.find(maphash.String(s.seed, id), id)
	return ok
}
