package valkey

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	valkeygo "github.com/valkey-io/valkey-go"
)

// maxMerge bounds how many identical calls one EVALSHA decides (ARGV[3]
// of lua/dispatch.lua; the script accepts up to 1000): a bound on how long
// one script run holds the server.
const maxMerge = 128

// run is the calls of a batch that one EVALSHA decides: identical calls
// (one client's concurrent requests on one route: same keys and ARGV), in
// the order they joined. The script decides them in turn at one now
// (lua/dispatch.lua, ARGV[3] = n): the same decisions as n runs at that
// instant, for the server's cost of about one (bench/RESULTS.md, "Merged
// decisions"). A run of one call is the common case. A run whose call's
// context had ended (skip) is answered with that error and never sent.
type run struct {
	calls    []*call
	skip     error
	answered bool
}

// merges reports whether cl makes the same script run as r, i.e. decides
// the same request: mode decide, same keys, same ARGV (time, limits, costs,
// lease ids; a concurrency check's lease id is unique per request, so such
// requests never merge), and r not full.
func (r *run) merges(cl *call) bool {
	h := r.calls[0]
	return len(r.calls) < maxMerge && h.args[1] == modeDecide &&
		slices.Equal(h.keys, cl.keys) && slices.Equal(h.args, cl.args)
}

// command is r's EVALSHA: its head's ARGV with n = len(r.calls).
func (r *run) command(c valkeygo.Client, sha string) valkeygo.Completed {
	h := r.calls[0]
	return c.B().Evalsha().Sha1(sha).Numkeys(int64(len(h.keys))).Key(h.keys...).Arg(r.args()...).Build()
}

// args is r's ARGV: the head's, with ARGV[3] = n when several calls merged.
func (r *run) args() []string {
	h := r.calls[0]
	if len(r.calls) == 1 {
		return h.args
	}
	args := slices.Clone(h.args)
	args[2] = strconv.Itoa(len(r.calls))
	return args
}

// answer hands res to each call of r with its place in it. After answer,
// r's calls belong to their callers (see call): r must not read them.
func (r *run) answer(res valkeygo.ValkeyResult, err error) {
	n := len(r.calls)
	for i, cl := range r.calls {
		cl.done <- reply{res: res, rep: i, n: n, err: err}
	}
	r.answered = true
}

// groupRuns groups calls into runs: a call joins the newest run with its
// first key when it merges with it, so the calls of one argument list keep
// their order; a merged call may still decide before a call between them
// in the batch that shares a key at another position — they were all in
// flight together, and any order among them is one they could have
// reached the server in. A call whose caller's context has ended is a run
// of its own to skip. It answers no call.
func groupRuns(calls []*call) []run {
	runs := make([]run, 0, len(calls))
	var newest map[string]int // a first key -> its newest run in runs
	if len(calls) > 1 {
		newest = make(map[string]int, len(calls))
	}
	for i, cl := range calls {
		one := calls[i : i+1 : i+1] // shares calls' array; merging copies it
		if err := cl.ctx.Err(); err != nil {
			runs = append(runs, run{calls: one, skip: err})
			continue
		}
		if j, ok := newest[cl.keys[0]]; ok && runs[j].merges(cl) {
			runs[j].calls = append(runs[j].calls, cl)
			continue
		}
		runs = append(runs, run{calls: one})
		if newest != nil {
			newest[cl.keys[0]] = len(runs) - 1
		}
	}
	return runs
}

// send runs calls with one DoMulti of EVALSHAs, one per run, under
// Options.Timeout, and answers every call. Runs whose EVALSHA found no
// script (NOSCRIPT: the server restarted or SCRIPT FLUSH ran, and nothing
// ran) are sent again: the first through valkey-go's Lua helper, which
// falls back to EVAL and so caches the script, the rest together as
// EVALSHAs again, as long as some find none. Each DoMulti and each helper
// call is one round trip for Options.OnRoundTrip (one per node it reached,
// on a Cluster), however many decisions it carries. If valkey-go panics,
// every run not yet answered gets an error before the panic goes on, so
// that no caller waits forever.
func (s *Store) send(c valkeygo.Client, calls []*call) {
	var runs []run
	defer func() {
		if r := recover(); r != nil {
			failUnanswered(calls, runs, fmt.Errorf("running decision batch: %v", r))
			panic(r)
		}
	}()
	runs = groupRuns(calls)
	ctx, cancel := context.WithTimeout(context.Background(), s.tmo)
	defer cancel()
	var tripErr error // the first round trip's failure, for the trace
	if end := s.traceBatch(calls); end != nil {
		defer func() { end(tripErr) }()
	}

	todo := make([]*run, 0, len(runs))
	for i := range runs {
		if r := &runs[i]; r.skip != nil {
			r.answer(valkeygo.ValkeyResult{}, r.skip)
		} else {
			todo = append(todo, r)
		}
	}
	helper := false // whether todo[0] goes through the Lua helper
	for len(todo) > 0 {
		if helper {
			r := todo[0]
			t := s.topo.table.Load()
			res := s.script.Exec(ctx, c, r.calls[0].keys, r.args())
			s.roundTrip(s.blame(t, r.calls[0].keys[0], res.Error()), res.Error())
			r.answer(res, nil)
			if todo = todo[1:]; len(todo) == 0 {
				break
			}
		}
		// A fresh slice each time: valkey-go may still read it after a
		// timeout returns.
		cmds := make(valkeygo.Commands, len(todo))
		for j, r := range todo {
			cmds[j] = r.command(c, s.sha)
		}
		again := todo[:0]
		var trips nodeTrips
		t := s.topo.table.Load()
		for j, res := range c.DoMulti(ctx, cmds...) {
			trips.add(s.blame(t, todo[j].calls[0].keys[0], res.Error()), res.Error())
			if tripErr == nil {
				tripErr = roundTripErr(res.Error())
			}
			if err, ok := valkeygo.IsValkeyErr(res.Error()); ok && err.IsNoScript() {
				again = append(again, todo[j])
				continue
			}
			todo[j].answer(res, nil)
		}
		trips.report(s)
		todo, helper = again, true
	}
}

// failUnanswered answers with err every call of a batch not yet answered:
// all of calls when they were not grouped into runs yet (runs nil), else
// those of every run not answered.
func failUnanswered(calls []*call, runs []run, err error) {
	if runs == nil {
		for _, cl := range calls {
			cl.done <- reply{err: err}
		}
	}
	for i := range runs {
		if !runs[i].answered {
			runs[i].answer(valkeygo.ValkeyResult{}, err)
		}
	}
}
