package adaptive

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/testutil/waitfor"
)

var gateT0 = time.Unix(1_700_000_000, 0)

// fixedGate is a gate whose limit stays n (min = max = initial).
func fixedGate(n int, classes ...Class) *Gate {
	cfg := Config{Min: n, Max: n, Initial: n, Window: time.Hour, Tolerance: 0.1, QueueTimeout: time.Hour}
	g := NewGate("up", cfg, classes, gateT0)
	g.est.rtt = time.Millisecond // a queue of an hour's drain: never full
	return g
}

var noBudget = Waiting{Max: time.Hour}

// arrival is one request started in the background: its label goes to
// admitted when it gets a slot, its outcome to done.
type arrival struct {
	g       *Gate
	tickets chan Ticket
	order   chan string
	shed    chan string
}

func newArrivals(g *Gate) *arrival {
	return &arrival{g: g, tickets: make(chan Ticket, 64), order: make(chan string, 64), shed: make(chan string, 64)}
}

// start queues a request of class from client, and waits until the gate
// holds it (queued, admitted or shed) before returning, so the queue's
// order is the calls' order.
func (a *arrival) start(t *testing.T, class int, client string) {
	t.Helper()
	before := a.g.waiting()
	go func() {
		tk, out, _ := a.g.Acquire(context.Background(), class, []byte(client), noBudget, gateT0)
		if out != Admitted {
			a.shed <- client
			return
		}
		a.order <- client
		a.tickets <- tk
	}()
	waitfor.True(t, "the gate holding the request of "+client, func() bool {
		return a.g.waiting() != before || len(a.shed) > 0
	})
}

// waiting is how many requests wait, for tests.
func (g *Gate) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.queued
}

func take(t *testing.T, g *Gate, class int, client string) Ticket {
	t.Helper()
	tk, out, _ := g.Acquire(context.Background(), class, []byte(client), noBudget, gateT0)
	if out != Admitted {
		t.Fatalf("%s: outcome %d, want admitted at once", client, out)
	}
	return tk
}

// next frees one slot and returns who got it.
func (a *arrival) next(t *testing.T, tk Ticket) (string, Ticket) {
	t.Helper()
	tk.Done(false, gateT0)
	select {
	case who := <-a.order:
		return who, <-a.tickets
	case <-time.After(10 * time.Second):
		t.Fatal("no waiting request admitted")
		return "", Ticket{}
	}
}

func TestGateRoundRobinAcrossClients(t *testing.T) {
	g := fixedGate(1, Class{Name: "all", Share: 1})
	a := newArrivals(g)
	tk := take(t, g, 0, "A")
	for _, c := range []string{"A", "A", "A", "A", "B", "C", "B"} {
		a.start(t, 0, c)
	}
	var got []string
	for range 7 {
		var who string
		who, tk = a.next(t, tk)
		got = append(got, who)
	}
	want := "A B C A B A A"
	if s := join(got); s != want {
		t.Fatalf("admitted %s, want %s", s, want)
	}
}

func TestGateSharesThenPriority(t *testing.T) {
	g := fixedGate(4, Class{Name: "hi", Share: 0.25}, Class{Name: "mid", Share: 0.25}, Class{Name: "lo", Share: 0.5})
	a := newArrivals(g)
	var held []Ticket
	for range 4 { // an idle class's share is used by the others
		held = append(held, take(t, g, 2, "lo"))
	}
	a.start(t, 2, "lo")
	a.start(t, 1, "mid")
	a.start(t, 1, "mid")
	a.start(t, 0, "hi")
	a.start(t, 0, "hi")
	var got []string
	for i := range 5 {
		who, tk := a.next(t, held[i])
		got = append(got, who)
		held = append(held, tk)
	}
	// hi is under its share (1 of 4): first; then mid under its share;
	// then nobody under share but lo (2 of 4)... lo holds 1 by then: lo.
	want := "hi mid lo hi mid"
	if s := join(got); s != want {
		t.Fatalf("admitted %s, want %s", s, want)
	}
}

func TestGateShedsLowestClassOverShare(t *testing.T) {
	g := fixedGate(2, Class{Name: "hi", Share: 0.5}, Class{Name: "lo", Share: 0.5})
	g.est.rtt = 0 // no latency measured yet: the queue holds one limit's worth
	a := newArrivals(g)
	t1, t2 := take(t, g, 0, "h1"), take(t, g, 0, "h2")
	a.start(t, 1, "l1")
	a.start(t, 1, "l2") // the queue is full
	// hi over its share too, but lo is the lowest over its share: its
	// newest waiting request goes.
	a.start(t, 0, "h3")
	if who := <-a.shed; who != "l2" {
		t.Fatalf("shed %s, want l2", who)
	}
	// lo is the lowest over its share and it is the newcomer's: shed.
	a.start(t, 1, "l3")
	if who := <-a.shed; who != "l3" {
		t.Fatalf("shed %s, want l3", who)
	}
	st := g.State(gateT0)
	if st.Classes[0].Shed != 0 || st.Classes[1].Shed != 2 || st.Classes[0].Queued != 1 || st.Classes[1].Queued != 1 {
		t.Fatalf("state %+v; want hi 0 shed 1 queued, lo 2 shed 1 queued", st.Classes)
	}
	// lo is under its share (0 of 1 slot) when a slot frees: l1 before h3.
	who, t3 := a.next(t, t1)
	if who != "l1" {
		t.Fatalf("admitted %s, want l1", who)
	}
	if who, _ = a.next(t, t2); who != "h3" {
		t.Fatalf("admitted %s, want h3", who)
	}
	t3.Done(false, gateT0)
}

func TestGateQueueBoundAndBudget(t *testing.T) {
	cfg := Config{Min: 1, Max: 1, Initial: 1, Window: time.Hour, Tolerance: 0.1, QueueTimeout: 20 * time.Millisecond}
	g := NewGate("up", cfg, []Class{{Name: "all", Share: 1}}, gateT0)
	tk := take(t, g, 0, "A")
	defer tk.Done(false, gateT0)
	var count atomic.Int64
	budget := Waiting{Count: &count, Cap: 10, Max: time.Hour}
	_, out, ra := g.Acquire(context.Background(), 0, []byte("B"), budget, gateT0)
	if out != Shed || ra != 1 || count.Load() != 0 {
		t.Fatalf("after its queue time: outcome %d, retry after %d s, waiting %d; want shed, 1, 0", out, ra, count.Load())
	}
	count.Store(10) // the instance's waiting budget is spent: shed at once
	_, out, _ = g.Acquire(context.Background(), 0, []byte("B"), budget, gateT0)
	if out != Shed || count.Load() != 10 {
		t.Fatalf("over max_waiting: outcome %d, waiting %d; want shed, 10", out, count.Load())
	}
	count.Store(0)
	_, out, _ = g.Acquire(context.Background(), 0, []byte("B"), Waiting{Count: &count, Cap: 10}, gateT0)
	if out != Shed {
		t.Fatalf("no wait left of max_wait: outcome %d, want shed", out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, out, _ = g.Acquire(ctx, 0, []byte("B"), budget, gateT0); out != Gone {
		t.Fatalf("client gone: outcome %d, want gone", out)
	}
}

func TestGateShadowNeverQueues(t *testing.T) {
	cfg := Config{Min: 1, Max: 1, Initial: 1, Window: time.Hour, Tolerance: 0.1, QueueTimeout: time.Hour, Shadow: true}
	g := NewGate("up", cfg, []Class{{Name: "all", Share: 1}}, gateT0)
	for range 5 {
		take(t, g, 0, "A")
	}
	if st := g.State(gateT0); st.Limit != 1 || st.Classes[0].InFlight != 5 || st.Classes[0].Shed != 0 {
		t.Fatalf("shadow state %+v", st)
	}
}

func join(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += " "
		}
		out += v
	}
	return out
}

// TestGateRetryAfterCapped: a shed request's Retry-After is the queue's
// drain time at limit ÷ latency (one request ahead of none at a limit of
// 1: the latency, rounded up), up to maxRetryAfter (60 s); a long-poll
// upstream's latency of minutes or hours answers 60, not the drain time.
func TestGateRetryAfterCapped(t *testing.T) {
	for _, tc := range []struct {
		rtt  time.Duration
		want int64
	}{
		{29500 * time.Millisecond, 30},
		{60 * time.Second, 60},
		{61 * time.Second, 60},
		{2 * time.Hour, 60},
	} {
		g := fixedGate(1, Class{Name: "all", Share: 1})
		g.est.rtt = tc.rtt
		tk := take(t, g, 0, "A")
		_, out, ra := g.Acquire(context.Background(), 0, []byte("B"), Waiting{}, gateT0)
		tk.Done(false, gateT0)
		if out != Shed || ra != tc.want {
			t.Errorf("latency %v: outcome %d, retry after %d s; want shed, %d", tc.rtt, out, ra, tc.want)
		}
	}
}
