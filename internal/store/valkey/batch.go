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
// The first caller to find no batch collecting leads one: it yields its CPU
// once (runtime.Gosched), so that the requests already runnable reach their
// decision and join, then sends the batch, bounded by Options.Timeout from
// then, and hands each caller its reply. A lone request yields to nobody
// and goes out at once. Callers that join wait for their reply or their own
// context, whichever comes first; the leader does not stop for its own
// context, since the batch carries the others' decisions too.
type batcher struct {
	mu      sync.Mutex
	collect *batch // the batch taking joiners; nil when none is

	// yield lets the runnable requests reach their decision before a
	// leader sends its batch: runtime.Gosched when nil; tests hold a batch
	// open with it.
	yield func()
}

// batch is one DoMulti: the calls in it and their commands.
type batch struct {
	calls []*call
	cmds  valkeygo.Commands
}

var batches = sync.Pool{New: func() any { return new(batch) }}

// call is one script run: its KEYS and ARGV, and its reply once sent.
// valkey-go copies KEYS and ARGV into its command, so a call goes back to
// calls when its reply has been read — unless its caller stopped waiting,
// in which case the leader of its batch still holds it and it is left to
// the garbage collector.
type call struct {
	keys, args []string
	res        valkeygo.ValkeyResult
	done       chan struct{} // receives once res is set (capacity 1)
}

var calls = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// release returns cl to calls, dropping its strings and reply (client keys
// must not outlive the request in a pool).
func (cl *call) release() {
	clear(cl.keys)
	clear(cl.args)
	cl.res = valkeygo.ValkeyResult{}
	calls.Put(cl)
}

// batches reports whether a run under ctx may join a batch: only when the
// store bounds its runs (Options.Timeout > 0) and ctx asks for no earlier
// deadline, since a batch runs under its leader's bound, not under the
// contexts of the callers in it.
func (s *Store) batches(ctx context.Context) bool {
	if s.tmo <= 0 {
		return false
	}
	d, ok := ctx.Deadline()
	return !ok || time.Until(d) > s.tmo
}

// do runs cl in a batch (see batcher) and returns its reply. Errors: ctx's,
// when it ends before the reply arrives; cl then stays with the batch's
// leader and must not be released.
func (b *batcher) do(ctx context.Context, s *Store, c valkeygo.Client, cl *call) (valkeygo.ValkeyResult, error) {
	b.mu.Lock()
	if bt := b.collect; bt != nil {
		bt.calls = append(bt.calls, cl)
		b.mu.Unlock()
		select {
		case <-cl.done:
			return cl.res, nil
		case <-ctx.Done():
			return valkeygo.ValkeyResult{}, ctx.Err()
		}
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
	s.send(c, bt)
	res := cl.res
	clear(bt.calls)
	clear(bt.cmds)
	bt.calls, bt.cmds = bt.calls[:0], bt.cmds[:0]
	batches.Put(bt)
	<-cl.done // the leader's own signal, so that cl can be reused
	return res, nil
}

// send runs every call of bt with one DoMulti of EVALSHAs under
// Options.Timeout, sets each call's reply and signals it. A call whose
// EVALSHA found no script (NOSCRIPT: the server restarted or SCRIPT FLUSH
// ran, and nothing was run) is sent again through valkey-go's Lua helper,
// which falls back to EVAL.
func (s *Store) send(c valkeygo.Client, bt *batch) {
	ctx, cancel := context.WithTimeout(context.Background(), s.tmo)
	defer cancel()
	for _, cl := range bt.calls {
		bt.cmds = append(bt.cmds, c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(cl.keys))).Key(cl.keys...).Arg(cl.args...).Build())
	}
	for i, res := range c.DoMulti(ctx, bt.cmds...) {
		cl := bt.calls[i]
		if err, ok := valkeygo.IsValkeyErr(res.Error()); ok && err.IsNoScript() {
			res = s.script.Exec(ctx, c, cl.keys, cl.args)
		}
		cl.res = res
		cl.done <- struct{}{}
	}
}
