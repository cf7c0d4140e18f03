package adaptive

import "time"

// waiterState is where a waiting request stands.
type waiterState uint8

const (
	queued   waiterState = iota // in its class's queue
	admitted                    // given a slot by dispatch
	evicted                     // shed to make room for another
)

// waiter is one request waiting for a slot; Gate keeps a free list.
type waiter struct {
	ready      chan struct{} // one signal: admitted or evicted
	class      int
	state      waiterState
	inflight   int       // in flight when admitted, itself included
	start      time.Time // when admitted
	client     *clientQueue
	next, prev *waiter
}

// clientQueue is one client's waiting requests of a class, oldest first.
type clientQueue struct {
	key        uint64
	head, tail *waiter
	n          int
}

// classQueue is one priority class: its requests in flight and those
// waiting, served by deficit round robin across clients. Every request
// costs one quantum, so each round admits one request of every waiting
// client: a client with a thousand queued requests waits its turn as one
// with a single request does.
type classQueue struct {
	inflight int
	queued   int
	clients  map[uint64]*clientQueue
	ring     []*clientQueue // clients with waiting requests, in serving order
	turn     int            // index in ring of the client served next
}

// push queues wt as client key's newest request.
func (q *classQueue) push(wt *waiter, key uint64) {
	cq := q.clients[key]
	if cq == nil {
		cq = &clientQueue{key: key}
		q.clients[key] = cq
		q.ring = append(q.ring, cq)
	}
	wt.client, wt.prev, wt.next = cq, cq.tail, nil
	if cq.tail != nil {
		cq.tail.next = wt
	} else {
		cq.head = wt
	}
	cq.tail = wt
	cq.n++
	q.queued++
}

// pop removes and returns the oldest request of the client whose turn it
// is, passing the turn on; q has waiting requests.
func (q *classQueue) pop() *waiter {
	cq := q.ring[q.turn]
	wt := cq.head
	last := cq.n == 1
	q.unlink(wt)
	if !last { // else unlink removed cq and the turn already moved on
		q.turn = (q.turn + 1) % len(q.ring)
	}
	return wt
}

// unlink takes wt out of its client's queue, and the client out of the
// ring when it has no more waiting requests.
func (q *classQueue) unlink(wt *waiter) {
	cq := wt.client
	if wt.prev != nil {
		wt.prev.next = wt.next
	} else {
		cq.head = wt.next
	}
	if wt.next != nil {
		wt.next.prev = wt.prev
	} else {
		cq.tail = wt.prev
	}
	wt.next, wt.prev = nil, nil
	cq.n--
	q.queued--
	if cq.n > 0 {
		return
	}
	delete(q.clients, cq.key)
	for i, c := range q.ring {
		if c != cq {
			continue
		}
		q.ring = append(q.ring[:i], q.ring[i+1:]...)
		if i < q.turn {
			q.turn--
		}
		break
	}
	if q.turn >= len(q.ring) {
		q.turn = 0
	}
}

// heaviest returns the newest request of the client with the most
// waiting (the last such in the ring: the latest to join); q has waiting
// requests.
func (q *classQueue) heaviest() *waiter {
	var top *clientQueue
	for _, cq := range q.ring {
		if top == nil || cq.n >= top.n {
			top = cq
		}
	}
	return top.tail
}
