package valkey

import (
	"context"
	"runtime"
	"sync"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
)

// batcher joins the script runs that concurrent requests start at about
// the same moment into one pipelined DoMulti: one write to the server, and
// one wake-up of it, for many decisions.
//
// valkey-go pipelines only what queues up while its writer goroutine is
// busy. On a proxy with one CPU (GOMAXPROCS=1) the Go scheduler runs that
// writer as soon as the first caller waits for its reply, so every decision
// went out in a write syscall of its own: on loopback that syscall was the
// largest part of what a Valkey decision cost the proxy, and the server
// paid one wake-up per decision (bench/RESULTS.md, "Valkey").
//
// A caller that finds no batch collecting leads one. If no other batch is
// in flight it sends at once, alone, through valkey-go's Lua helper: the
// server is idle, so waiting would only add latency (a yield cost ≈ 0.1 ms
// at p50 under light load here), and a batch of one would only add
// allocations. Otherwise it yields its CPU once (runtime.Gosched), so that
// the requests already runnable reach their decision and join, then sends
// the batch (Store.send: identical calls merged into runs, runs.go),
// bounded by Options.Timeout from then, and hands each caller its reply.
// Callers that join wait for their reply or their own context, whichever
// comes first; the leader waits for the batch, since it carries the
// others' decisions too. A call whose context has ended by the time its
// batch is sent is left out of it.
type batcher struct {
	mu       sync.Mutex
	collect  *batch // the batch taking joiners; nil when none is
	inflight int    // batches sent and not yet answered

	// yield lets the runnable requests reach their decision before a
	// leader sends its batch: runtime.Gosched when nil; tests hold a batch
	// open with it.
	yield func()
}

// batch is one DoMulti: the calls in it.
type batch struct{ calls []*call }

var batches = sync.Pool{New: func() any { return new(batch) }}

// call is one script run a caller asks for: its KEYS and ARGV and its
// caller's context. Ownership passes with the reply: from do until a reply
// arrives on done the batch owns the call (it reads keys, args and ctx and
// sends exactly one reply); once the caller has received it, the caller
// owns the call again and returns it to calls. A caller that stops waiting
// never gets it back: the batch still owns it, and it is left to the
// garbage collector. valkey-go copies KEYS and ARGV into its command, so
// nothing outlives the reply.
type call struct {
	keys, args []string
	ctx        context.Context
	done       chan reply // capacity 1: the batch's reply never blocks
}

// reply is the answer to one call: res decides n identical requests
// (merged calls, runs.go) and the call's request is the rep-th of them
// (from 0); err replaces res when the call was not sent (its context had
// ended, or the send panicked), so that an error still means nothing was
// decided for it.
type reply struct {
	res    valkeygo.ValkeyResult
	rep, n int
	err    error
}

var calls = sync.Pool{New: func() any { return &call{done: make(chan reply, 1)} }}

// release returns cl to calls, dropping its strings and context (client
// keys must not outlive the request in a pool). Only cl's owner may call it.
func (cl *call) release() {
	clear(cl.keys)
	clear(cl.args)
	cl.ctx = nil
	calls.Put(cl)
}

// batches reports whether cl, run under ctx, may join a batch: only when
// the store bounds its runs (Options.Timeout > 0) and ctx asks for no
// earlier deadline, since a batch runs under its leader's bound, not under
// the contexts of the callers in it; and only with keys (valkey-go's
// Cluster client cannot pipeline a keyless command with others).
func (s *Store) batches(ctx context.Context, cl *call) bool {
	if s.tmo <= 0 || len(cl.keys) == 0 {
		return false
	}
	d, ok := ctx.Deadline()
	return !ok || time.Until(d) > s.tmo
}

// do runs cl under ctx in a batch (see batcher) and returns its reply. An
// error other than the reply's own is ctx's, when it ends before the reply
// arrives: the batch then keeps cl (see call), and the caller must not
// release it. ok reports whether the caller owns cl again.
func (b *batcher) do(ctx context.Context, s *Store, c valkeygo.Client, cl *call) (r reply, ok bool) {
	if err := ctx.Err(); err != nil {
		return reply{err: err}, true
	}
	cl.ctx = ctx
	b.mu.Lock()
	if bt := b.collect; bt != nil {
		bt.calls = append(bt.calls, cl)
		b.mu.Unlock()
		select {
		case r := <-cl.done:
			return r, true
		case <-ctx.Done():
			return reply{err: ctx.Err()}, false
		}
	}
	collect := b.inflight > 0
	b.inflight++
	var bt *batch
	if collect {
		bt = batches.Get().(*batch)
		bt.calls = append(bt.calls, cl)
		b.collect = bt
	}
	b.mu.Unlock()
	defer b.sent()
	if !collect {
		return s.sendAlone(c, cl), true
	}
	return b.lead(s, c, bt, cl), true
}

// lead lets the runnable callers join bt, the batch that cl opened, sends
// it and returns cl's reply.
func (b *batcher) lead(s *Store, c valkeygo.Client, bt *batch, cl *call) reply {
	if b.yield != nil {
		b.yield()
	} else {
		runtime.Gosched()
	}
	b.mu.Lock()
	b.collect = nil
	b.mu.Unlock()
	s.send(c, bt.calls)
	r := <-cl.done // the leader's own reply: cl is the leader's again
	clear(bt.calls)
	bt.calls = bt.calls[:0]
	batches.Put(bt)
	return r
}

// sent ends one batch in flight.
func (b *batcher) sent() {
	b.mu.Lock()
	b.inflight--
	b.mu.Unlock()
}

// sendAlone runs cl by itself through valkey-go's Lua helper (EVALSHA,
// EVAL on NOSCRIPT) under Options.Timeout: one round trip.
func (s *Store) sendAlone(c valkeygo.Client, cl *call) reply {
	ctx, cancel := context.WithTimeout(context.Background(), s.tmo)
	defer cancel()
	t := s.topo.table.Load()
	end := s.traceOne(cl.ctx)
	res := s.script.Exec(ctx, c, cl.keys, cl.args)
	s.roundTrip(s.blame(t, cl.keys[0], res.Error()), res.Error())
	if end != nil {
		end(roundTripErr(res.Error()))
	}
	return reply{res: res, n: 1}
}

// traceOne starts the traced round trip of one run under ctx
// (Options.TraceRoundTrip); nil when tracing is off.
func (s *Store) traceOne(ctx context.Context) func(error) {
	if s.trace == nil {
		return nil
	}
	return s.trace([]context.Context{ctx})
}

// traceBatch starts the traced round trip of a batch of calls
// (Options.TraceRoundTrip); nil when tracing is off.
func (s *Store) traceBatch(calls []*call) func(error) {
	if s.trace == nil {
		return nil
	}
	ctxs := make([]context.Context, len(calls))
	for i, cl := range calls {
		ctxs[i] = cl.ctx
	}
	return s.trace(ctxs)
}
