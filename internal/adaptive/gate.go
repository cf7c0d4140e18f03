package adaptive

import (
	"context"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Class is a priority class (server.priority_classes): Share is the
// fraction of the limit, in [0, 1], its requests are guaranteed under
// contention. Classes are ordered from the highest priority down.
type Class struct {
	Name  string
	Share float64
}

// Outcome is what Acquire did with a request.
type Outcome uint8

const (
	// Admitted: the request holds a slot; Ticket.Done frees it.
	Admitted Outcome = iota
	// Shed: refused for overload (the queue was full, the request was
	// evicted by a higher-need class, or it waited its whole bound).
	Shed
	// Gone: the caller's context ended while it waited.
	Gone
)

// Waiting is the per-instance budget of waiting requests a Gate's queue
// shares with leaky-bucket delays (server.max_waiting, server.max_wait).
type Waiting struct {
	Count *atomic.Int64 // requests waiting now, any kind; nil: not shared
	Cap   int64         // most that may wait (server.max_waiting)
	Max   time.Duration // longest this request may still wait (server.max_wait less its delay)
}

// Gate admits the requests to one upstream: at most the estimator's limit
// in flight, the rest queued by class and client. Safe for concurrent use.
type Gate struct {
	// Upstream names the upstream in metrics.
	Upstream string
	classes  []Class
	cfg      Config
	seed     maphash.Seed
	shed     []atomic.Uint64 // by class

	mu       sync.Mutex
	est      *Estimator
	inflight int
	queued   int
	byClass  []classQueue
	free     []*waiter
}

// NewGate returns a gate for upstream with cfg over classes (at least one),
// its estimator's first window opening at now.
func NewGate(upstream string, cfg Config, classes []Class, now time.Time) *Gate {
	g := &Gate{Upstream: upstream, classes: classes, cfg: cfg, seed: maphash.MakeSeed(),
		shed: make([]atomic.Uint64, len(classes)), est: NewEstimator(cfg, now),
		byClass: make([]classQueue, len(classes))}
	for i := range g.byClass {
		g.byClass[i].clients = map[uint64]*clientQueue{}
	}
	return g
}

// Ticket is an admitted request's slot; its zero value holds none.
type Ticket struct {
	g        *Gate
	class    int
	inflight int       // in flight at admission, itself included
	start    time.Time // admission
}

// Held reports whether t holds a slot.
func (t Ticket) Held() bool { return t.g != nil }

// Done frees t's slot at now, the end of its response, and admits
// waiting requests into the freed slots. sample says whether the time
// the slot was held is a latency sample: false for a failure (no
// response) or a stream (its length is the client's, not the upstream's).
func (t Ticket) Done(sample bool, now time.Time) {
	g := t.g
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	g.byClass[t.class].inflight--
	if sample {
		g.est.Sample(now.Sub(t.start), t.inflight, now)
	} else {
		g.est.Tick(now)
	}
	g.dispatch(now)
}

// Acquire waits for a slot for a request of class from client (its key:
// plan credential or address) at now. It returns the ticket of an
// admitted request, or Shed with the seconds after which a retry may find
// room (the queue's drain time, at least 1, at most maxRetryAfter), or Gone.
func (g *Gate) Acquire(ctx context.Context, class int, client []byte, w Waiting, now time.Time) (Ticket, Outcome, int64) {
	g.mu.Lock()
	if g.cfg.Shadow || g.inflight < g.est.Limit() && g.queued == 0 {
		t := g.admit(class, now)
		g.mu.Unlock()
		return t, Admitted, 0
	}
	bound := min(w.Max, g.cfg.QueueTimeout)
	if bound <= 0 || !g.makeRoom(class, w) {
		ra := g.retryAfter()
		g.mu.Unlock()
		g.shed[class].Add(1)
		return Ticket{}, Shed, ra
	}
	wt := g.enqueue(class, maphash.Bytes(g.seed, client))
	g.mu.Unlock()
	if w.Count != nil {
		defer w.Count.Add(-1)
	}
	return g.wait(ctx, wt, bound)
}

// wait blocks until wt is admitted or evicted, bound passes or ctx ends.
func (g *Gate) wait(ctx context.Context, wt *waiter, bound time.Duration) (Ticket, Outcome, int64) {
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case <-wt.ready:
	case <-timer.C:
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	defer g.recycle(wt)
	switch {
	case wt.state == admitted:
		return Ticket{g: g, class: wt.class, inflight: wt.inflight, start: wt.start}, Admitted, 0
	case wt.state == queued: // its time ran out, or the client left
		g.remove(wt)
		if ctx.Err() != nil {
			return Ticket{}, Gone, 0
		}
	}
	g.shed[wt.class].Add(1)
	return Ticket{}, Shed, g.retryAfter()
}

// admit takes a slot for class at now. Caller holds g.mu.
func (g *Gate) admit(class int, now time.Time) Ticket {
	g.inflight++
	g.byClass[class].inflight++
	return Ticket{g: g, class: class, inflight: g.inflight, start: now}
}

// capacity is how many requests the queue holds: what drains within
// QueueTimeout at limit ÷ latency, at least one limit's worth. Caller
// holds g.mu.
func (g *Gate) capacity() int {
	limit := g.est.Limit()
	rtt := g.est.RTT()
	if rtt <= 0 {
		return limit
	}
	return max(limit, int(float64(limit)*float64(g.cfg.QueueTimeout)/float64(rtt)))
}

// maxRetryAfter is the longest Retry-After a shed request is given, in
// seconds: the limit and latency that set the drain time change within a
// few windows, so a longer estimate (minutes or hours behind a long-poll
// upstream whose responses take 30 s) would keep clients away long after
// the overload has passed.
const maxRetryAfter = 60

// retryAfter is the seconds the queue takes to drain at limit ÷ latency,
// rounded up, at least 1 and at most maxRetryAfter. Caller holds g.mu.
func (g *Gate) retryAfter() int64 {
	rtt := g.est.RTT()
	if rtt <= 0 {
		return 1
	}
	perSecond := float64(g.est.Limit()) / rtt.Seconds()
	return min(maxRetryAfter, max(1, int64(math.Ceil(float64(g.queued+1)/perSecond))))
}

// makeRoom reports whether a request of class may queue: the queue and
// the instance's waiting budget have room, or a waiting request of the
// lowest class over its share was evicted for it. Caller holds g.mu.
func (g *Gate) makeRoom(class int, w Waiting) bool {
	if g.queued < g.capacity() && w.take() {
		return true
	}
	victim := g.victim(class)
	if victim == nil {
		return false
	}
	g.evict(victim)
	if w.Count != nil {
		w.Count.Add(1) // the evicted request gives its place back as it wakes
	}
	return true
}

// victim returns the newest waiting request of the heaviest client of
// the lowest class over its share of the limit (the newcomer counted in
// its own class), or nil when that class is the newcomer's (it is shed
// itself) or no class over its share has a waiting request. Caller holds
// g.mu.
func (g *Gate) victim(class int) *waiter {
	limit := float64(g.est.Limit())
	for c := len(g.classes) - 1; c >= 0; c-- {
		q := &g.byClass[c]
		use := q.inflight + q.queued
		if c == class {
			use++
		}
		switch {
		case float64(use) <= g.classes[c].Share*limit:
		case c == class:
			return nil
		case q.queued > 0:
			return q.heaviest()
		}
	}
	return nil
}

// take counts one more waiting request against the instance's budget,
// reporting false (and counting nothing) when it is spent.
func (w Waiting) take() bool {
	if w.Count == nil {
		return true
	}
	if w.Count.Add(1) > w.Cap {
		w.Count.Add(-1)
		return false
	}
	return true
}

// dispatch admits waiting requests at now while slots are free: first the
// highest class under its guaranteed share, else the highest class
// waiting (an idle class's share goes to the others). Caller holds g.mu.
func (g *Gate) dispatch(now time.Time) {
	for g.queued > 0 && g.inflight < g.est.Limit() {
		c := g.nextClass()
		wt := g.byClass[c].pop()
		g.queued--
		t := g.admit(c, now)
		wt.state, wt.inflight, wt.start = admitted, t.inflight, now
		wt.ready <- struct{}{}
	}
}

// nextClass returns the class whose waiting request is admitted next.
// Caller holds g.mu; some class has waiting requests.
func (g *Gate) nextClass() int {
	limit := float64(g.est.Limit())
	first := -1
	for c := range g.byClass {
		q := &g.byClass[c]
		if q.queued == 0 {
			continue
		}
		if float64(q.inflight) < g.classes[c].Share*limit {
			return c
		}
		if first < 0 {
			first = c
		}
	}
	return first
}

// evict sheds waiting request wt to make room. Caller holds g.mu.
func (g *Gate) evict(wt *waiter) {
	g.remove(wt)
	wt.state = evicted
	wt.ready <- struct{}{}
}

// remove takes queued wt out of its queue. Caller holds g.mu.
func (g *Gate) remove(wt *waiter) {
	g.byClass[wt.class].unlink(wt)
	g.queued--
}

// enqueue queues a request of class from client key. Caller holds g.mu.
func (g *Gate) enqueue(class int, key uint64) *waiter {
	var wt *waiter
	if n := len(g.free); n > 0 {
		wt, g.free = g.free[n-1], g.free[:n-1]
	} else {
		wt = &waiter{ready: make(chan struct{}, 1)}
	}
	wt.class, wt.state = class, queued
	g.byClass[class].push(wt, key)
	g.queued++
	return wt
}

// recycle returns wt to the free list, its signal drained. Caller holds g.mu.
func (g *Gate) recycle(wt *waiter) {
	select {
	case <-wt.ready:
	default:
	}
	wt.client, wt.next, wt.prev = nil, nil, nil
	g.free = append(g.free, wt)
}
