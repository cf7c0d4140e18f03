// Package valkey is the shared rlproxy store: limiter state lives in Valkey
// (or Redis >= 7.0, same protocol and Lua) and every decision is one Lua
// script run (EVALSHA, EVAL on NOSCRIPT), atomic across all of its checks.
//
// The scripts (lua/*.lua, one per algorithm plus a prelude and a
// dispatcher, joined by script.go) implement docs/DESIGN.md "Decision arithmetic" exactly, like
// package algo; the differential tests hold them to the same decisions.
// Every key written carries a PEXPIRE equal to the time until its state is
// idle, so idle clients leave nothing behind.
package valkey

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// argsPerCheck and replyPerCheck are the script's ARGV and reply stride
// (lua/dispatch.lua).
const (
	argsPerCheck  = 8
	replyPerCheck = 5
)

// ErrConnecting is returned while another call is (re)creating the client
// after a failed first connection: callers fail fast instead of queueing.
var ErrConnecting = errors.New("connecting to valkey: another attempt in progress")

// Options configures New.
type Options struct {
	// Addrs are "host:port" seeds. One address is a standalone server or a
	// Cluster seed; several are Cluster seeds (valkey-go detects Cluster
	// mode), or Sentinels when SentinelMaster is set. At least one.
	Addrs []string
	// Username and Password authenticate (AUTH, Redis 6 ACL); empty = none.
	Username, Password string
	// TLS enables TLS with this configuration; nil = plain TCP.
	TLS *tls.Config
	// Timeout bounds each Decide and Release (unless the caller's context
	// has an earlier deadline) and each dial; 0 = no store-imposed bound.
	// A decision that joins a batch (batch.go) is bounded by its batch's
	// Timeout, counted from when the batch is sent.
	Timeout time.Duration
	// KeyPrefix is the prefix the policy layer puts in front of every key
	// (config key_prefix, e.g. "rl:"). Check keys already carry it; it is
	// used only by ClientKeys and MemoryUsage to find one client's keys.
	KeyPrefix string
	// SentinelMaster is the Sentinel master set name; empty = no Sentinel.
	SentinelMaster string
	// OnRoundTrip, when non-nil, is told the outcome of every round trip
	// that carries decisions, per node (Store.Node: a Cluster master, or
	// the one server): a DoMulti of a batch, however many decisions it
	// holds, is one round trip to each node it reached; one script run is
	// one. err is nil, or the error that says the node did not answer in
	// time or at all (an error reply such as a script error is an answer:
	// nil). Runs whose caller gave up before the reply (context canceled)
	// are not reported. It is how guard.Circuits judges the store: a slow
	// batch is one failure, not one per decision in it, and a dead master
	// only its own. Called synchronously on the request path: keep it short.
	OnRoundTrip func(node string, err error)
	// OnTopology, when non-nil, is told a Cluster's slot owners (sorted
	// addresses) whenever the set read from CLUSTER SLOTS changes — every
	// second, and at once after a failed round trip — before the new
	// owners are used: guard.Circuits.Retain, so a node that left has no
	// breaker and a promoted replica starts with a closed one. It runs on
	// the topology watcher's goroutine.
	OnTopology func(nodes []string)
	// TraceRoundTrip, when non-nil, is called as a round trip carrying
	// decisions starts, with the contexts of the requests it decides (one
	// for a run sent alone, one per call of a batch), and returns what is
	// called with the round trip's error when it ends: package tracing's
	// span per round trip. Called on the request path: keep it short.
	TraceRoundTrip func(ctxs []context.Context) (end func(error))
}

// Store is a store.Store on Valkey. It is safe for concurrent use.
type Store struct {
	opt    valkeygo.ClientOption
	prefix string
	tmo    time.Duration
	script *valkeygo.Lua
	sha    string // the script's SHA-1 (ScriptSHA)

	// conn holds the client once connected; a value in connecting is the
	// right to create it (a one-slot semaphore that never blocks callers).
	conn       atomic.Pointer[valkeygo.Client]
	connecting chan struct{}

	limits limitCache // each limit's ARGV strings (args.go)
	batch  batcher    // concurrent runs share one DoMulti (batch.go)
	onTrip func(node string, err error)
	trace  func(ctxs []context.Context) (end func(error)) // Options.TraceRoundTrip
	onTopo func(nodes []string)
	topo   topology // Cluster slot owners (nodes.go)
	single string   // the node name outside Cluster mode
}

var _ store.Store = (*Store)(nil)

// New returns a Store for opt. It does not fail when the server is down (a
// fleet starts in any order): it tries to connect once, and if that fails
// Decide keeps trying and returns errors until the server answers. It
// fails only on invalid options (no address).
func New(ctx context.Context, opt Options) (*Store, error) {
	if len(opt.Addrs) == 0 {
		return nil, errors.New("creating valkey store: no address")
	}
	s := &Store{
		opt: valkeygo.ClientOption{
			InitAddress: opt.Addrs,
			Username:    opt.Username,
			Password:    opt.Password,
			TLSConfig:   opt.TLS,
			Sentinel:    valkeygo.SentinelOption{MasterSet: opt.SentinelMaster},
			// A decision script may have run when the connection broke:
			// never resend it (valkey-go's Lua still retries EVALSHA's NOSCRIPT
			// with EVAL, which is safe since NOSCRIPT means nothing ran).
			DisableRetry: true,
			// Client-side caching serves no command here.
			DisableCache: true,
			// One connection per node, as valkey-go gives a Cluster. A
			// connection the server closed is found only by the next command
			// on it; with four per node, up to three would each fail one
			// decision after an outage ended ("store down" after "store up
			// again"). Throughput is the same (bench_test.go: 256 callers
			// pipeline on one connection at least as fast).
			PipelineMultiplex: -1,
		},
		prefix:     opt.KeyPrefix,
		tmo:        opt.Timeout,
		script:     valkeygo.NewLuaScript(Script()),
		sha:        ScriptSHA(),
		connecting: make(chan struct{}, 1),
		onTrip:     opt.OnRoundTrip,
		trace:      opt.TraceRoundTrip,
		onTopo:     opt.OnTopology,
		topo:       topology{kick: make(chan struct{}, 1), stop: make(chan struct{})},
		single:     singleName(opt.Addrs),
	}
	if opt.Timeout > 0 {
		s.opt.Dialer.Timeout = opt.Timeout
	}
	// A failure here is not fatal: Decide connects on demand.
	_, _ = s.Client(ctx)
	return s, nil
}

// Client returns the valkey-go client, connecting first if needed, for raw
// commands in tests and the compare subcommand (MEMORY USAGE, SCRIPT
// FLUSH, INFO). Errors: the connection error, or ErrConnecting while
// another goroutine is connecting. The Store owns the client: do not Close it.
func (s *Store) Client(ctx context.Context) (valkeygo.Client, error) {
	if c := s.conn.Load(); c != nil {
		return *c, nil
	}
	select {
	case s.connecting <- struct{}{}:
	default:
		return nil, ErrConnecting
	}
	defer func() { <-s.connecting }()
	if c := s.conn.Load(); c != nil { // connected while we waited
		return *c, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("connecting to valkey: %w", err)
	}
	// Once created, valkey-go's client reconnects by itself after outages.
	c, err := valkeygo.NewClient(s.opt)
	if err != nil {
		err = fmt.Errorf("connecting to valkey %s: %w", strings.Join(s.opt.InitAddress, ","), err)
		// One failed round trip to Options.OnRoundTrip: a store never
		// reached must open its breaker and count as an error, as one that
		// went away does.
		s.roundTrip(singleName(s.opt.InitAddress), err)
		return nil, err
	}
	s.conn.Store(&c)
	if c.Mode() == valkeygo.ClientModeCluster {
		s.watchTopology(c)
	}
	return c, nil
}

// withTimeout applies Options.Timeout unless ctx has an earlier deadline.
func (s *Store) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.tmo <= 0 {
		return ctx, func() {}
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= s.tmo {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.tmo)
}

// Script modes (ARGV[2] of lua/dispatch.lua).
const (
	modeDecide = "0" // decide, charge all or none
	modeCheck  = "1" // decide, write nothing; accepted checks report cost-0 values
	modeRefund = "2" // undo a charge made at now (refund_<name> in lua/<name>.lua)
)

// Decide implements store.Store: one script run decides all checks
// atomically at now (Unix ms; 0 = the server's TIME). Errors: connecting,
// timeout, a script error (e.g. a key holding foreign data), a malformed
// reply, or two checks on one key (the script needs distinct keys; the
// memory store allows them); out is then undefined.
//
// On a Valkey Cluster, checks whose keys hash to different slots (a route
// whose policies use different key sources, e.g. [header:X-API-Key] and
// [ip]) cannot share one script (CROSSSLOT). Decide then runs one script
// per slot group, all at the same now (the first group's TIME): first every
// group in check mode (decide, write nothing); if any check refuses, that is
// the decision and nothing was charged. Otherwise it charges the groups in
// slot order; should a group refuse now — another request charged it
// between the check and the charge — the groups already charged are
// refunded (each algorithm's refund_<name> in lua/<name>.lua undoes
// exactly their charge) and the request is refused. The refund makes "a refused request is charged by none" hold
// again, but not atomically: between a group's charge and its refund (one
// round trip) other requests see it charged and may be refused for it,
// i.e. the race can only make limiting briefly stricter, never let more
// requests through than the limit. A store error after some groups were
// charged refunds them on a best-effort basis (the failed group's own
// charge may or may not have run: it is not refunded). A decision within
// one slot (every check of one key source) is one atomic script as always.
func (s *Store) Decide(ctx context.Context, checks []store.Check, now int64, out []algo.Decision) (int64, error) {
	if len(out) != len(checks) {
		return 0, fmt.Errorf("deciding: %d checks but %d decisions", len(checks), len(out))
	}
	// The script decides each check from its key's state as it was before
	// the decision (phase 1, then phase 2), which two checks on one key
	// would break. The configuration cannot produce them (policy names on a
	// route are unique, and so are the keys' suffixes).
	for i := 1; i < len(checks); i++ {
		for j := range i {
			if checks[i].Key == checks[j].Key {
				return 0, fmt.Errorf("deciding: checks %d and %d share key %q", j, i, checks[i].Key)
			}
		}
	}
	c, err := s.Client(ctx)
	if err != nil {
		return 0, err
	}
	if c.Mode() == valkeygo.ClientModeCluster && len(checks) > 1 {
		if groups := slotGroups(checks); len(groups) > 1 {
			// One bound for all the runs of a split decision.
			ctx, cancel := s.withTimeout(ctx)
			defer cancel()
			return s.decideGroups(ctx, c, checks, groups, now, out)
		}
	}
	return s.run(ctx, c, modeDecide, checks, now, out)
}

// exec runs the script in mode over checks at now, bounded by
// Options.Timeout (or ctx's earlier deadline), and returns its reply,
// which decides n identical requests, this one the rep-th (from 0): a
// batch may merge this run with identical ones (runs.go). The run joins a
// batch of concurrent runs (batch.go) when Store.batches allows: keys, a
// Timeout, and no deadline of ctx's own within it. Unbatched decision
// runs (not refunds) are reported to Options.OnRoundTrip here, batches by
// their sender.
func (s *Store) exec(ctx context.Context, c valkeygo.Client, mode string, checks []store.Check, now int64) (reply []valkeygo.ValkeyMessage, rep, n int, err error) {
	cl := calls.Get().(*call)
	s.scriptArgs(cl, mode, checks, now)
	if s.batches(ctx, cl) {
		r, owned := s.batch.do(ctx, s, c, cl)
		if owned {
			defer cl.release()
		}
		if r.err != nil {
			return nil, 0, 0, r.err
		}
		reply, err = r.res.ToArray()
		return reply, r.rep, r.n, err
	}
	defer cl.release()
	tctx, cancel := s.withTimeout(ctx)
	defer cancel()
	t := s.topo.table.Load()
	end := s.traceOne(ctx)
	reply, err = s.script.Exec(tctx, c, cl.keys, cl.args).ToArray()
	if mode != modeRefund && !(errors.Is(err, context.Canceled) && ctx.Err() != nil) {
		s.roundTrip(s.blame(t, cl.keys[0], err), err)
	}
	if end != nil {
		end(roundTripErr(err))
	}
	return reply, 0, 1, err
}

// roundTrip reports one decision round trip's outcome on node
// (Options.OnRoundTrip); a failure on a Cluster asks for the slot owners
// again (a failover may have moved them).
func (s *Store) roundTrip(node string, err error) {
	err = roundTripErr(err)
	if err != nil && s.topo.table.Load() != nil {
		s.kickTopology()
	}
	if s.onTrip != nil {
		s.onTrip(node, err)
	}
}

// roundTripErr is err when it says the server did not answer (a timeout,
// a broken connection), nil for nil or an error reply.
func roundTripErr(err error) error {
	if _, ok := valkeygo.IsValkeyErr(err); ok {
		return nil
	}
	return err
}

// run decides checks (all in one slot) with one script run in mode
// (modeDecide or modeCheck) and fills out; it returns the time used.
func (s *Store) run(ctx context.Context, c valkeygo.Client, mode string, checks []store.Check, now int64, out []algo.Decision) (int64, error) {
	reply, rep, n, err := s.exec(ctx, c, mode, checks, now)
	if err != nil {
		return 0, fmt.Errorf("running decision script: %w", err)
	}
	if len(reply) != 1+replyPerCheck*len(checks)*n {
		return 0, fmt.Errorf("reading decision reply: %d values for %d checks × %d requests", len(reply), len(checks), n)
	}
	used, err := reply[0].AsInt64()
	if err != nil {
		return 0, fmt.Errorf("reading decision reply: now: %w", err)
	}
	base := 1 + rep*replyPerCheck*len(checks)
	for i := range out {
		var v [replyPerCheck]int64
		for j := range v {
			if v[j], err = reply[base+i*replyPerCheck+j].AsInt64(); err != nil {
				return 0, fmt.Errorf("reading decision reply: check %d: %w", i, err)
			}
		}
		out[i] = algo.Decision{
			Allowed:    v[0] == 1,
			Remaining:  v[1],
			RetryAfter: v[2],
			Wait:       v[3],
			ResetAfter: v[4],
		}
	}
	return used, nil
}

// Refund implements store.Store: the script's refund mode
// (refund_<name> in lua/<name>.lua, the inverse package algo's
// RefundLease mirrors) undoes the charge that an accepted Decide of
// checks made at now. now must be the time Decide returned (the server's
// TIME when it was called with 0); 0 here would mean the server's TIME again, which undoes nothing useful.
// On a Cluster, checks in several hash slots are refunded one slot group
// at a time (not atomically across groups, like the split Decide).
// Errors: connecting, timeout, a script error; groups before the failing
// one are refunded.
func (s *Store) Refund(ctx context.Context, checks []store.Check, now int64) error {
	if err := s.runEach(ctx, modeRefund, checks, now); err != nil {
		return fmt.Errorf("refunding: %w", err)
	}
	return nil
}

// runEach runs checks in mode — refund or charge, the modes whose reply
// holds no decision — as one script run or, on a Cluster, one run per
// hash-slot group in ascending slot order: not atomic across groups, and
// the groups before a failing one have run. Errors: connecting, timeout,
// a script error.
func (s *Store) runEach(ctx context.Context, mode string, checks []store.Check, now int64) error {
	if len(checks) == 0 {
		return nil
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	c, err := s.Client(ctx)
	if err != nil {
		return err
	}
	if c.Mode() == valkeygo.ClientModeCluster && len(checks) > 1 {
		if groups := slotGroups(checks); len(groups) > 1 {
			return s.execGroups(ctx, c, mode, checks, groups, now)
		}
	}
	_, _, _, err = s.exec(ctx, c, mode, checks, now)
	return err
}

// Release implements store.Store: it removes the Concurrency leases among
// checks (ZREM, pipelined). Errors: connecting, timeout, the first failed ZREM.
func (s *Store) Release(ctx context.Context, checks []store.Check) error {
	n := 0
	for _, ch := range checks {
		if ch.Limit.Kind == algo.Concurrency {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	c, err := s.Client(ctx)
	if err != nil {
		return err
	}
	cmds := make(valkeygo.Commands, 0, n)
	for _, ch := range checks {
		if ch.Limit.Kind == algo.Concurrency {
			cmds = append(cmds, c.B().Zrem().Key(ch.Key).Member(ch.Lease).Build())
		}
	}
	for _, r := range c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("releasing lease: %w", err)
		}
	}
	return nil
}

// Close closes the client (if connected). It always returns nil. The
// Store must not be used after Close (a later call would reconnect).
func (s *Store) Close() error {
	if c := s.conn.Swap(nil); c != nil {
		if (*c).Mode() == valkeygo.ClientModeCluster {
			close(s.topo.stop)
		}
		(*c).Close()
	}
	return nil
}
