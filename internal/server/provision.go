package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rlproxy/internal/accesslog"
	"rlproxy/internal/allotment"
	"rlproxy/internal/config"
	"rlproxy/internal/control"
	"rlproxy/internal/envoyrls"
	"rlproxy/internal/live"
	"rlproxy/internal/policy"
	"rlproxy/internal/proxy"
	"rlproxy/internal/store"
	"rlproxy/internal/store/guard"
	"rlproxy/internal/store/memory"
	"rlproxy/internal/store/valkey"
	"rlproxy/internal/tlsutil"
	"rlproxy/internal/tracing"
	"rlproxy/internal/upstream"
)

// process holds the parts that live as long as the process, across every
// generation.
type process struct {
	level   slog.LevelVar // log.level, changed on reload
	logOut  io.Writer     // the process log's writer (access log "stderr")
	reg     *prometheus.Registry
	floor   *memory.Store // fallback floors while failing open
	lease   string        // this process's concurrency lease id prefix
	ups     *upstream.Set // upstream servers, kept across reloads
	live    *live.Recorder
	rls     *envoyrls.Service // nil when envoy_rls was off at start
	started time.Time
	tracer  *tracing.Tracer     // exports traces (tracing, read at start only); nil: off
	ctl     *control.Controller // the operators' entries (control, read at start only)
}

func newProcess(opts Options) *process {
	w := opts.Log
	if w == nil {
		w = io.Discard
	}
	return &process{
		logOut:  w,
		reg:     prometheus.NewRegistry(),
		floor:   memory.New(memory.Options{MaxKeys: 100_000}),
		lease:   leasePrefix(),
		live:    live.New(time.Now),
		started: time.Now(),
	}
}

// provision builds cfg's generation, keeping cur's store and access log
// when their sections are unchanged (state survives reloads,
// docs/CONTRACT.md); cur is nil at start. Nothing is swapped in: on error
// the running generation is untouched and what was built is closed.
func (a *App) provision(cfg *config.Config, cur *generation) (*generation, error) {
	g := newGeneration(cfg)
	if err := a.provisionParts(g, cur); err != nil {
		g.close(nil)
		return nil, err
	}
	return g, nil
}

func (a *App) provisionParts(g *generation, cur *generation) error {
	cfg := g.cfg
	var err error
	if cfg.TLS != nil {
		if g.tls, err = readTLS(cfg.TLS); err != nil {
			return err
		}
	}
	if g.store, err = a.provisionStore(cfg, cur); err != nil {
		return err
	}
	lim, err := policy.New(cfg, policy.Options{Store: g.store.v.st, Floor: a.proc.floor, Metrics: a.metrics, LeasePrefix: a.proc.lease, Log: a.log, Now: a.opts.Now, Control: a.proc.ctl})
	if err != nil {
		return err
	}
	if g.rt, err = proxy.NewRuntimeOn(a.proc.ups, cfg, lim, a.metrics, a.log); err != nil {
		return err
	}
	if cur != nil {
		g.rt.KeepGates(cur.rt)
	}
	// Compiled: the policy layer's index is their one copy. cfg is not
	// shared yet, so this is still its owner's change (config.ReleaseKeys).
	cfg.ReleaseKeys()
	return a.provisionAccessLog(g, cur)
}

// provisionStore returns cur's store when it also serves cfg, else a new one.
func (a *App) provisionStore(cfg *config.Config, cur *generation) (*shared[storeParts], error) {
	if cur != nil && sameStore(cfg.Store, cur.cfg.Store) {
		return cur.store.retain(), nil
	}
	st, cache, err := a.newStore(cfg)
	if err != nil {
		return nil, err
	}
	return newShared(storeParts{st: st, cache: cache}, func(p storeParts) { _ = p.st.Close() }), nil
}

// swapIn makes g's parts serve requests from now on, then publishes g,
// retiring the generation it replaces (closed once no request uses it).
// At start g is current already.
func (a *App) swapIn(g *generation) {
	cfg := g.cfg
	if g.tls != nil {
		a.ls.tls.Store(g.tls)
	}
	if c := g.store.v.cache; c != nil && a.gens.current().store == g.store {
		c.Flush() // kept across a reload whose limits may differ: a cached refusal may no longer hold
	}
	a.proc.live.Configure(cfg)
	a.proc.ctl.Configure(cfg)
	a.srv.Swap(g.rt)
	var l *accesslog.Logger
	if g.access != nil {
		l = g.access.v
	}
	a.srv.SetAccessLog(l)
	if a.proc.rls != nil {
		a.proc.rls.Swap(cfg, g.rt.Limiter)
	}
	if a.ls.lim != nil {
		a.ls.lim.set(cfg.Server)
		a.ls.lim.trust(cfg.RealIP.TrustedProxies)
	}
	a.proc.level.Set(cfg.Log.Level)
	a.warn(cfg)
	if a.gens.current() != g {
		a.gens.publish(g, cfg.Server.ShutdownTimeout)
	}
}

// sameStore reports whether the store built for b also serves a, so that a
// reload keeps it (and every client's state). The memory store depends on
// type and max_keys alone: comparing the whole section made a change of an
// unused valkey or breaker field, or of key_hash_secret_env (which the
// policy layer uses, not the store), throw away every limit's state.
func sameStore(a, b config.Store) bool {
	a.HashSecret, b.HashSecret = nil, nil
	if a.Type != "valkey" && b.Type != "valkey" {
		return a.MaxKeys == b.MaxKeys
	}
	return reflect.DeepEqual(a, b)
}

func (a *App) newStore(cfg *config.Config) (store.Store, *guard.OverLimitCache, error) {
	if cfg.Store.Type != "valkey" {
		a.metrics.SetAllotments(nil)
		ms := memory.New(memory.Options{MaxKeys: cfg.Store.MaxKeys})
		a.metrics.SetMemoryStore(ms)
		a.metrics.SetStoreUp(true)
		return ms, nil, nil
	}
	a.metrics.SetMemoryStore(nil)
	v := cfg.Store.Valkey
	var tc *tls.Config
	if v.TLS {
		pool, err := tlsutil.CertPool(v.CAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("building valkey TLS: %w", err)
		}
		tc = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	}
	// One circuit per node (Cluster master), judging round trips, which
	// the store reports: a batch of decisions that times out is one
	// failure, and a dead master opens only its own slots' circuit.
	b := cfg.Store.Breaker
	var circs *guard.Circuits
	circs = guard.NewCircuits(guard.BreakerOptions{
		Failures: b.Failures, Cooldown: b.Cooldown,
		FailureRatio: b.FailureRatio, Window: b.Window, MinCalls: b.MinCalls,
	}, func(node string, open bool) {
		a.metrics.SetStoreNodeUp(node, !open)
		a.metrics.SetBreakerOpen(!circs.Up())
		if open {
			a.log.Warn("store node unreachable: circuit breaker open, its keys follow each policy's fail mode", "node", node)
		} else {
			a.log.Warn("store node reachable again: circuit breaker closed", "node", node)
		}
	}, func(node string) { a.metrics.SetStoreNodeUp(node, true) })
	health := newStoreHealthLog(a.log)
	vs, err := valkey.New(context.Background(), valkey.Options{
		Addrs: v.Addrs, Username: v.Username, Password: v.Password, TLS: tc,
		Timeout: v.Timeout, KeyPrefix: v.KeyPrefix, SentinelMaster: v.SentinelMaster,
		TraceRoundTrip: a.proc.tracer.StoreHook(),
		// One failed round trip (a batch of many decisions, one node) is
		// one store error, as the breaker judges it.
		OnRoundTrip: func(node string, err error) {
			circs.Record(node, err)
			if err != nil {
				a.metrics.StoreError()
			}
			health.record(node, err)
		},
		// The breakers follow the slot owners: a node that left takes its
		// circuit and its rlproxy_store_node_up series with it.
		OnTopology: func(nodes []string) {
			circs.Retain(nodes, func(node string) {
				a.metrics.DeleteStoreNode(node)
				a.log.Info("store node left the topology: its circuit breaker is removed", "node", node)
			})
			a.metrics.SetBreakerOpen(!circs.Up())
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("building valkey store: %w", err)
	}
	a.metrics.SetStoreUp(true)
	// The allotment layer decides the hot keys of policies with
	// `allotment:` from slices fetched from the store itself; every other
	// decision passes on through the breaker. It is there whatever the
	// policies say, so a reload that turns allotments on needs no new store.
	// Units an allotment gives back make a refusal the over-limit cache
	// remembers for the key stale; the cache is built on top of the layer,
	// so the layer finds it through cached.
	var cached atomic.Pointer[guard.OverLimitCache]
	al := allotment.New(circs.Guard(vs, vs.Node), vs, allotment.Options{Timeout: v.Timeout, SweepEvery: 100 * time.Millisecond,
		Returned: func(key string) {
			if c := cached.Load(); c != nil {
				c.Forget(key)
			}
		}})
	a.metrics.SetAllotments(al)
	var st store.Store = al
	if v.DisableLocalCache { // local_cache: false
		return st, nil, nil
	}
	cache := guard.NewOverLimitCache(st, guard.OverLimitOptions{MaxEntries: 100_000, OnLocalRefusal: a.metrics.LocalRefusal})
	cached.Store(cache)
	return cache, cache, nil
}
