package valkey

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
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
// allocations. Otherwise
// it yields its CPU once (runtime.Gosched), so that the requests already
// runnable reach their decision and join, then sends the batch, bounded by
// Options.Timeout from then, and hands each caller its reply. Callers that
// join wait for their reply or their own context, whichever comes first;
// the leader waits for the batch, since it carries the others' decisions
// too. A call whose context has ended by the time its batch is sent is
// left out of it.
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

// call is one script run: its KEYS and ARGV, its caller's context, and its
// reply once sent. valkey-go copies KEYS and ARGV into its command, so a
// call goes back to calls when its reply has been read — unless its caller
// stopped waiting, in which case the leader of its batch still holds it and
// it is left to the garbage collector.
type call struct {
	keys, args []string
	ctx        context.Context
	res        valkeygo.ValkeyResult
	// rep and n: res decides n identical requests (Store.send merges
	// identical calls), this call's is the rep-th of them (from 0).
	rep, n int
	err    error         // instead of res: not sent (see batcher.send)
	done   chan struct{} // receives once res or err is set (capacity 1)
}

var calls = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// release returns cl to calls, dropping its strings, context and reply
// (client keys must not outlive the request in a pool).
func (cl *call) release() {
	clear(cl.keys)
	clear(cl.args)
	cl.ctx, cl.res, cl.rep, cl.n, cl.err = nil, valkeygo.ValkeyResult{}, 0, 1, nil
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

// do runs cl under ctx in a batch (see batcher) and returns its reply.
// Errors: ctx's, when it ends before the reply arrives — cl then stays
// with the batch's leader and must not be released — or ended before the
// batch was sent, in which case nothing was sent for cl.
func (b *batcher) do(ctx context.Context, s *Store, c valkeygo.Client, cl *call) (valkeygo.ValkeyResult, error) {
	if err := ctx.Err(); err != nil {
		return valkeygo.ValkeyResult{}, err
	}
	cl.ctx = ctx
	b.mu.Lock()
	if bt := b.collect; bt != nil {
		bt.calls = append(bt.calls, cl)
		b.mu.Unlock()
		select {
		case <-cl.done:
			return cl.res, cl.err
		case <-ctx.Done():
			return valkeygo.ValkeyResult{}, ctx.Err()
		}
	}
	collect := b.inflight > 0
	b.inflight++
	if !collect {
		b.mu.Unlock()
		return b.sendAlone(s, c, cl)
	}
	bt := batches.Get().(*batch)
	bt.calls = append(bt.calls, cl)
	b.collect = bt
	b.mu.Unlock()

	if b.yield != nil {
		b.yield()
	} else {
		runtime.Gosched()
	}
	b.mu.Lock()
	b.collect = nil
	b.mu.Unlock()
	b.send(s, c, bt.calls)
	<-cl.done // the leader's own answer, so that cl can be reused
	clear(bt.calls)
	bt.calls = bt.calls[:0]
	batches.Put(bt)
	return cl.res, cl.err
}

// sendAlone runs cl by itself, counted as a batch in flight, through
// valkey-go's Lua helper (EVALSHA, EVAL on NOSCRIPT) under Options.Timeout.
func (b *batcher) sendAlone(s *Store, c valkeygo.Client, cl *call) (valkeygo.ValkeyResult, error) {
	defer func() {
		b.mu.Lock()
		b.inflight--
		b.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), s.tmo)
	defer cancel()
	return s.script.Exec(ctx, c, cl.keys, cl.args), nil
}

// send sends calls as one batch in flight (s.send).
func (b *batcher) send(s *Store, c valkeygo.Client, calls []*call) {
	defer func() {
		b.mu.Lock()
		b.inflight--
		b.mu.Unlock()
	}()
	s.send(c, calls)
}

// maxMerge bounds how many identical calls one EVALSHA decides (ARGV[3]
// of lua/dispatch.lua; the script accepts up to 1000): a bound on how long
// one script run holds the server.
const maxMerge = 128

// sameRun reports whether calls a and b would make the same script run,
// i.e. decide the same request: mode decide, same keys, same ARGV (time,
// limits, costs, lease ids; a concurrency check's lease id is unique per
// request, so such requests never merge).
func sameRun(a, b *call) bool {
	return a.args[1] == modeDecide && slices.Equal(a.keys, b.keys) && slices.Equal(a.args, b.args)
}

// runArgs returns cl's ARGV for a run deciding n identical requests.
func runArgs(cl *call, n int) []string {
	if n == 1 {
		return cl.args
	}
	args := slices.Clone(cl.args)
	args[2] = strconv.Itoa(n)
	return args
}

// send runs calls with one DoMulti of EVALSHAs under Options.Timeout, and
// answers each: sets its reply (or err) and signals done. Identical calls
// (concurrent requests of one client: same keys and arguments) share one
// EVALSHA that decides them in turn (lua/dispatch.lua, ARGV[3] = n): the
// same decisions as n runs at that instant, for the server's cost of about
// one run; each call gets the shared reply and its place in it. A call
// whose caller's context has ended is not sent: it is answered with the
// context's error, so that an error still means nothing was decided. Runs
// whose EVALSHA found no script (NOSCRIPT: the server restarted or SCRIPT
// FLUSH ran, and nothing ran) are sent again: the first through
// valkey-go's Lua helper, which falls back to EVAL and so caches the
// script, the rest together as EVALSHAs again, as long as some find none.
// If valkey-go panics, every call not yet answered gets an error before
// the panic goes on, so that no caller waits forever.
//
// A call must not be touched once answered: its caller may already have
// released it.
func (s *Store) send(c valkeygo.Client, calls []*call) {
	answered := make([]bool, len(calls))
	answer := func(i int, res valkeygo.ValkeyResult, rep, n int, err error) {
		calls[i].res, calls[i].rep, calls[i].n, calls[i].err = res, rep, n, err
		answered[i] = true
		calls[i].done <- struct{}{}
	}
	defer func() {
		if r := recover(); r != nil {
			for i := range calls {
				if !answered[i] {
					answer(i, valkeygo.ValkeyResult{}, 0, 1, fmt.Errorf("running decision batch: %v", r))
				}
			}
			panic(r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), s.tmo)
	defer cancel()

	// Group the calls still wanted into runs: heads holds each run's
	// first call; next links a run's calls in order (-1 ends it), last
	// and size are a head's last call and count. A call joins the newest
	// run with its first key, so the calls of one argument list keep their
	// order; a merged call may still decide before a call between them in
	// the batch that shares a key at another position — they were all in
	// flight together, and any order among them is one they could have
	// reached the server in.
	idx := make([]int, 3*len(calls))
	next, last, size := idx[:len(calls)], idx[len(calls):2*len(calls)], idx[2*len(calls):]
	heads := make([]int, 0, len(calls))
	var newest map[string]int // a first key -> the head of its newest run
	if len(calls) > 1 {
		newest = make(map[string]int, len(calls))
	}
	for i, cl := range calls {
		if err := cl.ctx.Err(); err != nil {
			answer(i, valkeygo.ValkeyResult{}, 0, 1, err)
			continue
		}
		next[i] = -1
		if h, ok := newest[cl.keys[0]]; ok && size[h] < maxMerge && sameRun(calls[h], cl) {
			next[last[h]], last[h] = i, i
			size[h]++
			continue
		}
		last[i], size[i] = i, 1
		heads = append(heads, i)
		if newest != nil {
			newest[cl.keys[0]] = i
		}
	}
	// answerRun hands run h's reply to each of its calls.
	answerRun := func(h int, res valkeygo.ValkeyResult) {
		n := size[h]
		for i, rep := h, 0; i >= 0; i, rep = next[i], rep+1 {
			answer(i, res, rep, n, nil)
		}
	}

	first := false // whether heads[0] goes through the Lua helper
	for len(heads) > 0 {
		if first {
			h := heads[0]
			answerRun(h, s.script.Exec(ctx, c, calls[h].keys, runArgs(calls[h], size[h])))
			if heads = heads[1:]; len(heads) == 0 {
				break
			}
		}
		// A fresh slice each time: valkey-go may still read it after a
		// timeout returns.
		cmds := make(valkeygo.Commands, len(heads))
		for j, h := range heads {
			cl := calls[h]
			cmds[j] = c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(cl.keys))).Key(cl.keys...).Arg(runArgs(cl, size[h])...).Build()
		}
		again := heads[:0]
		for j, res := range c.DoMulti(ctx, cmds...) {
			if err, ok := valkeygo.IsValkeyErr(res.Error()); ok && err.IsNoScript() {
				again = append(again, heads[j])
			} else {
				answerRun(heads[j], res)
			}
		}
		heads, first = again, true
	}
}
