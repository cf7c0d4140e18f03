// Package server assembles one rlproxy process from a configuration file:
// the store (memory, or Valkey behind the over-limit cache and the circuit
// breaker), the compiled policies, the public and admin listeners, hot
// reload, and graceful shutdown. cmd/rlproxy and the end-to-end tests both
// run it, so the tests exercise the production wiring.
package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rlproxy/internal/accesslog"
	"rlproxy/internal/admin"
	"rlproxy/internal/config"
	"rlproxy/internal/envoyrls"
	"rlproxy/internal/live"
	"rlproxy/internal/logging"
	"rlproxy/internal/metrics"
	"rlproxy/internal/policy"
	"rlproxy/internal/proxy"
	"rlproxy/internal/reload"
	"rlproxy/internal/store"
	"rlproxy/internal/store/guard"
	"rlproxy/internal/store/memory"
	"rlproxy/internal/store/valkey"
	"rlproxy/internal/tlsutil"
	"rlproxy/internal/tracing"
	"rlproxy/internal/upstream"
)

// Options tune an App beyond its configuration file.
type Options struct {
	// Version is reported by rlproxy_build_info and the start-up log.
	Version string
	// Log receives the process log (stderr in production); nil discards it.
	Log io.Writer
	// Debounce is the reload watcher's quiet time (0 = reload.DefaultDebounce).
	Debounce time.Duration
	// Now injects the time every rate-limit decision is made at (tests);
	// nil means each store's own clock (policy.Options.Now).
	Now func() time.Time
	// MaxConfigBytes bounds the config file and each keys_file, in bytes
	// (0 = config.DefaultMaxFileBytes; rlproxy -max-config-bytes).
	MaxConfigBytes int64
	// Overrides replace the file's listeners (flags, environment) at start
	// and on every reload.
	Overrides config.Overrides
}

// App is one serving rlproxy process. Build it with New, then Start (or
// Run); it is safe for concurrent use.
type App struct {
	path    string
	opts    Options
	log     *slog.Logger
	level   slog.LevelVar // log.level, changed on reload
	reg     *prometheus.Registry
	metrics *metrics.Metrics
	srv     *proxy.Server
	floor   *memory.Store // fallback floors while failing open
	lease   string
	ups     *upstream.Set // upstream servers, kept across reloads
	access  accessLog     // log.access (accesslog.go)

	reloadMu sync.Mutex // one Reload at a time (watcher, SIGHUP, callers)
	mu       sync.Mutex // guards the fields below
	cfg      *config.Config
	st       store.Store
	cache    *guard.OverLimitCache // nil on the memory store
	storeCfg config.Store

	tls     atomic.Pointer[serverTLS] // the public listener's certificate and client CAs
	hs      *http.Server
	ln      net.Listener
	lim     *limitListener // the public listener's connection cap and write timeout
	adm     *admin.Server
	watcher *reload.Watcher
	stop    context.CancelFunc
	served  chan error

	// The decision interfaces (nil when off): forward-auth and Envoy RLS.
	fa    *http.Server
	faLn  net.Listener
	rls   *envoyrls.Service
	rlsLn net.Listener
	// live feeds the admin page (rates, top refused clients); started and
	// reloadStatus (guarded by mu) are shown in its overview.
	live         *live.Recorder
	started      time.Time
	reloadStatus reloadStatus
	draining     atomic.Bool // shutdown begun: /readyz answers 503 (shutdown.go)

	// tracer exports traces (tracing, read at start only); nil: off.
	tracer *tracing.Tracer
}

// loadOptions are the config loader's options of o.
func (o Options) loadOptions() config.LoadOptions {
	return config.LoadOptions{MaxFileBytes: o.MaxConfigBytes, Overrides: o.Overrides}
}

// New loads the configuration at path and builds everything but the
// listeners. Errors: the file's problems (*config.Errors, one FILE:LINE:
// field: message per line) or a store that cannot be built.
func New(path string, opts Options) (*App, error) {
	cfg, err := config.LoadWith(path, opts.loadOptions())
	if err != nil {
		return nil, err
	}
	w := opts.Log
	if w == nil {
		w = io.Discard
	}
	a := &App{
		path:  path,
		opts:  opts,
		reg:   prometheus.NewRegistry(),
		floor: memory.New(memory.Options{MaxKeys: 100_000}),
		lease: leasePrefix(),
	}
	a.log = logging.New(cfg.Log, w, &a.level)
	a.metrics = metrics.New(a.reg, opts.Version)
	if a.tracer, err = tracing.New(cfg.Tracing, tracing.Options{Registerer: a.reg, Log: a.log, Version: opts.Version}); err != nil {
		return nil, err
	}
	a.ups = proxy.NewUpstreamSet(a.metrics, a.log, a.tracer)
	a.warn(cfg)
	rt, err := a.build(cfg)
	if err != nil {
		a.ups.Close()
		_ = a.tracer.Shutdown(context.Background())
		return nil, err
	}
	returnLoadMemory()
	a.live = live.New(time.Now)
	a.live.Configure(cfg)
	a.srv = proxy.New(rt, a.metrics, a.log)
	a.srv.SetTracer(a.tracer)
	if cfg.EnvoyRLS.Listen != "" {
		a.rls = envoyrls.New(a.metrics, a.log)
		a.rls.SetClientDisplay(a.srv.ClientDisplay())
		a.rls.Swap(cfg, rt.Limiter)
	}
	a.srv.Record(a.live)
	a.started = time.Now()
	a.setReloadStatus(a.started, nil)
	a.access.out = w
	if err := a.setAccessLog(cfg); err != nil {
		a.ups.Close()
		_ = a.tracer.Shutdown(context.Background())
		return nil, err
	}
	a.metrics.ConfigLoaded(time.Now())
	return a, nil
}

// leasePrefix makes this process's concurrency lease ids unique in a fleet.
func leasePrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + ":"
}

// Config returns the configuration currently served.
func (a *App) Config() *config.Config {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg
}

// Addr is the public listener's address once Start has returned, or ""
// when it is off (listen: "", a decision service only).
func (a *App) Addr() string { return addrOf(a.ln) }

// ForwardAuthAddr is the forward-auth listener's address, or "" when off.
func (a *App) ForwardAuthAddr() string { return addrOf(a.faLn) }

// EnvoyRLSAddr is the Envoy rate limit service's address, or "" when off.
func (a *App) EnvoyRLSAddr() string { return addrOf(a.rlsLn) }

func addrOf(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

// AdminAddr is the admin listener's address, or "" when disabled.
func (a *App) AdminAddr() string {
	if a.adm == nil {
		return ""
	}
	return a.adm.Addr()
}

// Handler returns the public request handler as the listeners serve it:
// the proxy, marking its responses Connection: close while draining. The
// per-connection guards (connection cap, write deadlines, the request-head
// check) belong to the listener, outside it.
func (a *App) Handler() http.Handler { return a.drainAware(a.srv) }

// Start opens the listeners (public, over TLS when configured; admin) and
// the reload watcher (file changes and SIGHUP), and serves in the
// background.
func (a *App) Start() error {
	cfg := a.Config()
	a.hs = &http.Server{
		Handler:           a.Handler(),
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		MaxHeaderBytes:    cfg.Server.MaxHeaderBytes,
		ErrorLog:          logging.LibraryLog(a.log, slog.LevelDebug, "net/http"),
		Protocols:         publicProtocols(cfg),
		// "OPTIONS *" reaches the proxy, which refuses it (400, as nginx):
		// net/http would answer it itself, outside routes and metrics.
		DisableGeneralOptionsHandler: true,
	}
	ln, err := a.listenPublic(cfg)
	if err != nil {
		return err
	}
	a.ln = ln
	if err := a.startDecisionListeners(cfg); err != nil {
		a.closeListeners()
		return err
	}
	if cfg.AdminListen != "" {
		opts := []admin.Option{admin.WithLogger(a.log), admin.WithPage(a.pageSource())}
		// RLPROXY_PPROF=1 adds /debug/pprof/ to the admin listener
		// (docs/reference/config.md): opt-in, because profiles expose internals.
		if os.Getenv("RLPROXY_PPROF") == "1" {
			opts = append(opts, admin.WithPprof())
		}
		a.adm = admin.New(cfg.AdminListen, a.metrics, func() bool { return a.srv.Runtime() != nil && !a.draining.Load() }, opts...)
		if err := a.adm.Start(); err != nil {
			a.closeListeners()
			return fmt.Errorf("starting admin listener: %w", err)
		}
	}
	w, err := reload.New(reload.Options{Path: a.path, Extra: a.extraFiles, Debounce: a.opts.Debounce, Reload: a.Reload, Logger: a.log})
	if err != nil {
		a.closeListeners()
		return err
	}
	a.watcher = w
	ctx, stop := context.WithCancel(context.Background())
	stopUSR1 := accesslog.OnReopenSignal(a.reopenAccessLog)
	a.stop = func() { stop(); stopUSR1() }
	go w.Run(ctx)
	go a.live.Run(ctx.Done())
	a.served = make(chan error, 3)
	if ln != nil {
		go func() { a.served <- a.hs.Serve(ln) }()
	}
	a.serveDecisionListeners()
	a.log.Info("rlproxy serving", "listen", a.Addr(), "admin", a.AdminAddr(),
		"forward_auth", a.ForwardAuthAddr(), "envoy_rls", a.EnvoyRLSAddr(), "store", cfg.Store.Type,
		"routes", len(cfg.Routes), "policies", len(cfg.Policies), "version", a.opts.Version)
	return nil
}

// Run starts the App and serves until ctx is done (SIGTERM in
// production), then shuts down the way load balancers expect (drain,
// shutdown.go).
func (a *App) Run(ctx context.Context) error {
	if err := a.Start(); err != nil {
		return err
	}
	select {
	case err := <-a.served:
		return err
	case <-ctx.Done():
	}
	return a.drain()
}

// Shutdown stops accepting connections and lets in-flight requests —
// including those waiting their turn in a leaky bucket — finish before ctx
// is done; then it closes the store.
func (a *App) Shutdown(ctx context.Context) error {
	a.draining.Store(true)
	a.stopWatching()
	var err error
	if a.hs != nil {
		err = a.hs.Shutdown(ctx)
	}
	a.shutdownDecisionListeners(ctx)
	if a.adm != nil {
		_ = a.adm.Shutdown(ctx)
	}
	a.mu.Lock()
	_ = a.st.Close()
	a.mu.Unlock()
	_ = a.floor.Close()
	a.srv.Runtime().Close()
	a.ups.Close()
	if l := a.srv.SetAccessLog(nil); l != nil {
		_ = l.Close() // after the in-flight requests: every line is written
	}
	_ = a.tracer.Shutdown(ctx) // after the in-flight requests: their spans are queued
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}

// build makes the runtime for cfg, reusing the current store when cfg's
// store section is unchanged (state survives reloads, docs/CONTRACT.md).
func (a *App) build(cfg *config.Config) (*proxy.Runtime, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st, cache := a.st, a.cache
	fresh := st == nil || !sameStore(cfg.Store, a.storeCfg)
	if fresh {
		var err error
		if st, cache, err = a.newStore(cfg); err != nil {
			return nil, err
		}
	}
	rt, err := a.runtime(cfg, st)
	if err != nil {
		if fresh {
			_ = st.Close()
		}
		return nil, err
	}
	cfg.ReleaseKeys() // compiled: the policy layer's index is their one copy
	if fresh && a.st != nil {
		old := a.st
		time.AfterFunc(cfg.Server.ShutdownTimeout, func() { _ = old.Close() })
	}
	if cache != nil {
		cache.Flush() // limits may have changed: a cached refusal may no longer hold
	}
	a.cfg, a.st, a.cache, a.storeCfg = cfg, st, cache, cfg.Store
	return rt, nil
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

func (a *App) runtime(cfg *config.Config, st store.Store) (*proxy.Runtime, error) {
	lim, err := policy.New(cfg, policy.Options{Store: st, Floor: a.floor, Metrics: a.metrics, LeasePrefix: a.lease, Log: a.log, Now: a.opts.Now})
	if err != nil {
		return nil, err
	}
	return proxy.NewRuntimeOn(a.ups, cfg, lim, a.metrics, a.log)
}

// newStore builds the store cfg names. Valkey is wrapped in the local
// over-limit cache and the circuit breaker; construction never needs the
// server to be up (a fleet starts in any order).
func (a *App) newStore(cfg *config.Config) (store.Store, *guard.OverLimitCache, error) {
	if cfg.Store.Type != "valkey" {
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
		TraceRoundTrip: a.tracer.StoreHook(),
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
	br := circs.Guard(vs, vs.Node)
	if v.DisableLocalCache { // local_cache: false
		return br, nil, nil
	}
	cache := guard.NewOverLimitCache(br, guard.OverLimitOptions{MaxEntries: 100_000, OnLocalRefusal: a.metrics.LocalRefusal})
	return cache, cache, nil
}

// Reload loads the configuration file again and swaps it in — or keeps
// serving the running one and logs why (file, line, field), counting the
// outcome in rlproxy_config_reloads_total. Content identical to the
// running configuration is not a reload. The watcher calls it on file
// changes and SIGHUP.
func (a *App) Reload(reason string) {
	// Two concurrent reloads of one change would both see it as new and
	// count it twice.
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	now := time.Now()
	cfg, err := config.LoadWith(a.path, a.opts.loadOptions())
	if err != nil {
		a.refuse(reason, now, err)
		return
	}
	// The certificate is not part of Config.Digest: a renewed certificate
	// under an unchanged config is a reload of the certificate alone.
	var cert *serverTLS
	if cfg.TLS != nil {
		if cert, err = readTLS(cfg.TLS); err != nil {
			a.refuse(reason, now, err)
			return
		}
	}
	old := a.Config()
	if old.Digest == cfg.Digest {
		if cur := a.tls.Load(); cert != nil && cur != nil && cur.filesChanged(cert) {
			a.tls.Store(cert)
			a.metrics.ConfigReload(true, now)
			a.setReloadStatus(now, nil)
			a.log.Info("TLS certificate reloaded", "reason", reason)
			return
		}
		a.log.Info("config unchanged; not reloading", "reason", reason)
		a.clearRefusal(now)
		return
	}
	if cfg.Listen != old.Listen || cfg.AdminListen != old.AdminListen || (cfg.TLS == nil) != (old.TLS == nil) || cfg.Log.Format != old.Log.Format ||
		cfg.ForwardAuth.Listen != old.ForwardAuth.Listen || cfg.EnvoyRLS.Listen != old.EnvoyRLS.Listen || !reflect.DeepEqual(cfg.Tracing, old.Tracing) {
		a.log.Warn("listen, admin_listen, forward_auth.listen, envoy_rls.listen, log.format, tracing and turning tls on or off take effect on restart only")
	}
	rt, err := a.build(cfg)
	if err != nil {
		a.refuse(reason, now, err)
		return
	}
	if cert != nil {
		a.tls.Store(cert) // only with the config it belongs to
	}
	a.live.Configure(cfg)
	prev := a.srv.Swap(rt)
	if a.rls != nil {
		a.rls.Swap(cfg, rt.Limiter)
	}
	if err := a.setAccessLog(cfg); err != nil {
		a.log.Error("log.access not changed", "err", err.Error())
	}
	if a.lim != nil {
		a.lim.set(cfg.Server)
		a.lim.trust(cfg.RealIP.TrustedProxies)
	}
	a.level.Set(cfg.Log.Level)
	a.warn(cfg)
	a.metrics.ConfigReload(true, now)
	a.setReloadStatus(now, nil)
	a.log.Info("config reloaded", "reason", reason, "routes", len(cfg.Routes), "policies", len(cfg.Policies))
	time.AfterFunc(cfg.Server.ShutdownTimeout, prev.Close)
	returnLoadMemory()
}

// returnLoadMemory returns what a load left behind to the OS at once: a
// big keys_file's bytes and credentials (released once compiled) are
// garbage bigger than the file, which would otherwise stay in the
// process's footprint until a collection the idle heap does not trigger
// and the scavenger's slow return (bench/configmem.sh, 1,280,000 keys:
// RSS stayed at the load's peak without it). A load is rare, and a forced
// collection of a heap without such tables takes about a millisecond.
func returnLoadMemory() { debug.FreeOSMemory() }

// warn logs cfg's warnings: valid settings that are probably mistakes.
func (a *App) warn(cfg *config.Config) {
	for _, w := range cfg.Warnings {
		a.log.Warn("config warning: " + w.String())
	}
}

// maxLoggedProblems bounds the problems a refused reload logs (one line
// under 64 KiB); `rlproxy validate` prints them all.
const maxLoggedProblems = 100

// refuse logs and counts a refused reload, then returns the memory the
// failed load took to the OS: a big file's YAML tree and problem list must
// not stay in the process's footprint until the next GC cycles.
func (a *App) refuse(reason string, now time.Time, err error) {
	a.metrics.ConfigReload(false, now)
	var ce *config.Errors
	msg := ""
	if errors.As(err, &ce) {
		msg = ce.Summary(maxLoggedProblems)
	} else {
		msg = err.Error()
	}
	// The admin page keeps the bounded summary, not a huge file's problems.
	a.setReloadStatus(now, errors.New(msg))
	a.log.Error("config reload refused; keeping the running configuration", "reason", reason, "err", msg)
	returnLoadMemory()
}

// extraFiles are the files besides the config whose change is a reload:
// plans keys files, the TLS certificate and key, the client CAs and CRL.
func (a *App) extraFiles() []string {
	cfg := a.Config()
	var files []string
	for _, p := range cfg.Plans {
		if p.KeysFile != "" {
			files = append(files, p.KeysFile)
		}
	}
	if cfg.TLS != nil {
		files = append(files, cfg.TLS.CertFile, cfg.TLS.KeyFile)
		if cfg.TLS.ClientCA != "" {
			files = append(files, cfg.TLS.ClientCA)
		}
		if cfg.TLS.ClientCRL != "" {
			files = append(files, cfg.TLS.ClientCRL)
		}
	}
	return files
}

func (a *App) loadCert(t *config.TLS) error {
	st, err := readTLS(t)
	if err != nil {
		return err
	}
	a.tls.Store(st)
	return nil
}

// readCert loads t's certificate and key as a pair.
func readCert(t *config.TLS) (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("loading TLS certificate: %w", err)
	}
	return &c, nil
}
