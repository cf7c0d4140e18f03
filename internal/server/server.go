// Package server assembles one rlproxy process from a configuration file:
// the store (memory, or Valkey behind the over-limit cache and the circuit
// breaker), the compiled policies, the public and admin listeners, hot
// reload, and graceful shutdown. cmd/rlproxy and the end-to-end tests both
// run it, so the tests exercise the production wiring.
package server

import (
	"cmp"
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
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"rlproxy/internal/accesslog"
	"rlproxy/internal/config"
	"rlproxy/internal/envoyrls"
	"rlproxy/internal/logging"
	"rlproxy/internal/metrics"
	"rlproxy/internal/proxy"
	"rlproxy/internal/reload"
	"rlproxy/internal/tracing"
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
	// Sleep serves the proxy's leaky-bucket waits on the clock Now reads
	// (tests, proxy.Server.SetSleep); nil means real timers.
	Sleep proxy.Sleep
	// MaxConfigBytes bounds the config file and each keys_file, in bytes
	// (0 = config.DefaultMaxFileBytes; rlproxy -max-config-bytes).
	MaxConfigBytes int64
	// Overrides replace the file's listeners (flags, environment) at start
	// and on every reload.
	Overrides config.Overrides
	// DefaultEngine is server.engine when the file sets none ("": auto);
	// package rlproxytest runs the suite on either engine with it.
	DefaultEngine string
}

// App is one serving rlproxy process: wiring only. What one configuration
// builds is a generation (generation.go), what lives as long as the
// process is in process (provision.go), what Start opens in listeners
// (listeners.go). Build it with New, then Start (or Run); it is safe for
// concurrent use.
type App struct {
	path     string
	opts     Options
	log      *slog.Logger
	metrics  *metrics.Metrics
	proc     *process
	srv      *proxy.Server
	gens     *generations
	ls       listeners
	reloadMu sync.Mutex  // one Reload at a time (watcher, SIGHUP, callers)
	status   status      // the last load's outcome, for the admin page (admin.go)
	draining atomic.Bool // shutdown begun: /readyz answers 503 (shutdown.go)
}

// loadOptions are the config loader's options of o.
func (o Options) loadOptions() config.LoadOptions {
	return config.LoadOptions{MaxFileBytes: o.MaxConfigBytes, Overrides: o.Overrides, DefaultEngine: o.DefaultEngine}
}

// New loads the configuration at path and builds everything but the
// listeners. Errors: the file's problems (*config.Errors, one FILE:LINE:
// field: message per line), a store or a TLS certificate that cannot be
// built.
func New(path string, opts Options) (*App, error) {
	cfg, err := config.LoadWith(path, opts.loadOptions())
	if err != nil {
		return nil, err
	}
	a := &App{path: path, opts: opts}
	a.proc = newProcess(opts)
	a.log = logging.New(cfg.Log, a.proc.logOut, &a.proc.level)
	a.metrics = metrics.New(a.proc.reg, opts.Version)
	if a.proc.tracer, err = tracing.New(cfg.Tracing, tracing.Options{Registerer: a.proc.reg, Log: a.log, Version: opts.Version}); err != nil {
		_ = a.proc.floor.Close()
		return nil, err
	}
	a.proc.ups = proxy.NewUpstreamSet(a.metrics, a.log, a.proc.tracer)
	if a.proc.ctl, err = a.newControl(cfg); err != nil {
		a.proc.ups.Close()
		_ = a.proc.floor.Close()
		_ = a.proc.tracer.Shutdown(context.Background())
		return nil, err
	}
	g, err := a.provision(cfg, nil)
	if err != nil {
		a.closeControl()
		a.proc.ups.Close()
		_ = a.proc.floor.Close()
		_ = a.proc.tracer.Shutdown(context.Background())
		return nil, err
	}
	returnLoadMemory()
	a.srv = proxy.New(g.rt, a.metrics, a.log)
	a.srv.SetTracer(a.proc.tracer)
	a.srv.SetSleep(a.opts.Sleep)
	a.srv.Record(a.proc.live)
	if cfg.EnvoyRLS.Listen != "" {
		a.proc.rls = envoyrls.New(a.metrics, a.log, grpc.ChainUnaryInterceptor(a.inGenerationRPC))
		a.proc.rls.SetClientDisplay(a.srv.ClientDisplay())
	}
	a.gens = newGenerations(g, metrics.NewGenerationsRetained(a.proc.reg), a.log)
	a.swapIn(g)
	a.status.set(a.proc.started, nil)
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
func (a *App) Config() *config.Config { return a.gens.current().cfg }

// Addr is the public listener's address once Start has returned, or ""
// when it is off (listen: "", a decision service only).
func (a *App) Addr() string { return addrOf(a.ls.ln) }

// ForwardAuthAddr is the forward-auth listener's address, or "" when off.
func (a *App) ForwardAuthAddr() string { return addrOf(a.ls.faLn) }

// EnvoyRLSAddr is the Envoy rate limit service's address, or "" when off.
func (a *App) EnvoyRLSAddr() string { return addrOf(a.ls.rlsLn) }

func addrOf(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

// AdminAddr is the admin listener's address, or "" when disabled.
func (a *App) AdminAddr() string {
	if a.ls.adm == nil {
		return ""
	}
	return a.ls.adm.Addr()
}

// Handler returns the public request handler as the listeners serve it:
// the proxy, holding the generation current when each request began
// (inGeneration) and marking its responses Connection: close while
// draining. The per-connection guards (connection cap, write deadlines,
// the request-head check) belong to the listener, outside it.
func (a *App) Handler() http.Handler { return a.inGeneration(a.drainAware(a.srv)) }

// inGeneration serves h holding the generation current when the request
// began, so the parts it uses (policies, store, access log) stay open
// until it ends.
func (a *App) inGeneration(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g := a.gens.acquire(); g != nil {
			defer g.release()
		}
		h.ServeHTTP(w, r)
	})
}

// inGenerationRPC is inGeneration for the Envoy rate limit service's calls.
func (a *App) inGenerationRPC(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if g := a.gens.acquire(); g != nil {
		defer g.release()
	}
	return h(ctx, req)
}

// Start opens the listeners (public, over TLS when configured; admin) and
// the reload watcher (file changes and SIGHUP), and serves in the
// background.
func (a *App) Start() error {
	cfg := a.Config()
	if err := a.listen(cfg); err != nil {
		a.closeListeners()
		return err
	}
	w, err := reload.New(reload.Options{Path: a.path, Extra: a.extraFiles, Debounce: a.opts.Debounce, Reload: a.Reload, Logger: a.log})
	if err != nil {
		a.closeListeners()
		return err
	}
	a.ls.watcher = w
	ctx, stop := context.WithCancel(context.Background())
	stopUSR1 := accesslog.OnReopenSignal(a.reopenAccessLog)
	a.ls.stop = func() { stop(); stopUSR1() }
	go w.Run(ctx)
	go a.proc.live.Run(ctx.Done())
	go a.proc.ctl.Run(ctx)
	a.serve()
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
	case err := <-a.ls.served:
		return err
	case <-ctx.Done():
	}
	return a.drain()
}

// Shutdown stops accepting connections and lets in-flight requests —
// including those waiting their turn in a leaky bucket — finish before ctx
// is done; then it closes every generation (the store, the access log).
func (a *App) Shutdown(ctx context.Context) error {
	a.draining.Store(true)
	a.stopWatching()
	var err error
	if a.ls.eng != nil {
		// The engine first: a request in flight there may still be
		// handed to the net/http server, which drains after it.
		err = a.ls.eng.shutdown(ctx, a.ls.ln)
	}
	if a.ls.hs != nil {
		err = cmp.Or(err, a.ls.hs.Shutdown(ctx))
	}
	a.shutdownDecisionListeners(ctx)
	a.stopACME()
	if a.ls.adm != nil {
		_ = a.ls.adm.Shutdown(ctx)
	}
	a.srv.SetAccessLog(nil) // a request outliving ctx (an upgrade) logs nothing
	a.reloadMu.Lock()
	a.gens.shutdown() // after the in-flight requests: every line is written
	a.reloadMu.Unlock()
	_ = a.proc.floor.Close()
	a.closeControl()
	a.proc.ups.Close()
	_ = a.proc.tracer.Shutdown(ctx) // after the in-flight requests: their spans are queued
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
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
	if a.gens.shut() {
		a.log.Info("shut down; not reloading", "reason", reason)
		return
	}
	now := time.Now()
	cur := a.gens.current()
	cfg, err := config.LoadWith(a.path, a.opts.loadOptions())
	if err == nil && cfg.Digest == cur.cfg.Digest {
		err = a.reloadTLS(reason, now, cfg)
	} else if err == nil {
		err = a.reloadConfig(reason, now, cfg, cur)
	}
	if err != nil {
		a.refuse(reason, now, err)
	}
}

// reloadConfig builds cfg's generation over cur's and serves it.
func (a *App) reloadConfig(reason string, now time.Time, cfg *config.Config, cur *generation) error {
	g, err := a.provision(cfg, cur)
	if err != nil {
		return err
	}
	if names := config.RestartOnly(cur.cfg, cfg); names != nil {
		a.log.Warn("changed settings take effect on restart only", "settings", strings.Join(names, ", "))
	}
	a.swapIn(g)
	a.metrics.ConfigReload(true, now)
	a.status.set(now, nil)
	a.log.Info("config reloaded", "reason", reason, "routes", len(cfg.Routes), "policies", len(cfg.Policies))
	returnLoadMemory()
	return nil
}

// reloadTLS handles a file identical to the running configuration: the
// certificate is not part of Config.Digest, so a renewed certificate under
// it is a reload of the certificate alone; anything else is no reload.
func (a *App) reloadTLS(reason string, now time.Time, cfg *config.Config) error {
	if cfg.TLS != nil {
		cert, err := readTLS(cfg.TLS)
		if err != nil {
			return err
		}
		if live := a.ls.tls.Load(); live != nil && live.filesChanged(cert) {
			a.ls.tls.Store(cert)
			a.metrics.ConfigReload(true, now)
			a.status.set(now, nil)
			a.log.Info("TLS certificate reloaded", "reason", reason)
			return nil
		}
	}
	a.log.Info("config unchanged; not reloading", "reason", reason)
	a.status.clearRefusal(now)
	return nil
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
	a.status.set(now, errors.New(msg))
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
		if cfg.TLS.CertFile != "" { // "" with tls.acme alone
			files = append(files, cfg.TLS.CertFile, cfg.TLS.KeyFile)
		}
		if cfg.TLS.ClientCA != "" {
			files = append(files, cfg.TLS.ClientCA)
		}
		if cfg.TLS.ClientCRL != "" {
			files = append(files, cfg.TLS.ClientCRL)
		}
	}
	return files
}

// readCert loads t's certificate and key as a pair.
func readCert(t *config.TLS) (*tls.Certificate, error) {
	if t.CertFile == "" { // tls.acme alone
		return nil, nil
	}
	c, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("loading TLS certificate: %w", err)
	}
	return &c, nil
}
