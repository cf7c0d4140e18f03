package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rlproxy/internal/admin"
	"rlproxy/internal/config"
	"rlproxy/internal/logging"
	"rlproxy/internal/metrics"
	"rlproxy/internal/policy"
	"rlproxy/internal/proxy"
	"rlproxy/internal/reload"
	"rlproxy/internal/store"
	"rlproxy/internal/store/guard"
	"rlproxy/internal/store/memory"
	"rlproxy/internal/store/valkey"
)

// app owns one serving process: the store, the swap of configurations on
// reload, the listeners and shutdown.
type app struct {
	path    string
	log     *slog.Logger
	metrics *metrics.Metrics
	srv     *proxy.Server
	floor   *memory.Store
	lease   string

	mu       sync.Mutex // serialises reloads; guards the fields below
	cfg      *config.Config
	st       store.Store
	cache    *guard.OverLimitCache // nil on the memory store
	storeCfg config.Store

	cert atomic.Pointer[tls.Certificate]
}

func cmdServe(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("rlproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "configs/rlproxy.yaml", "configuration file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintf(stderr, "rlproxy: loading config:\n%v\n", err)
		return 1
	}
	log := logging.New(cfg.Log, stderr)
	a := &app{path: *path, log: log, floor: memory.New(memory.Options{MaxKeys: 100_000}), lease: leasePrefix()}
	reg := prometheus.NewRegistry()
	a.metrics = metrics.New(reg, version)
	if err := a.serve(cfg); err != nil {
		log.Error("rlproxy stopped", "err", err)
		return 1
	}
	return 0
}

// leasePrefix makes this process's concurrency lease ids unique in a fleet.
func leasePrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + ":"
}

func (a *app) serve(cfg *config.Config) error {
	rt, err := a.build(cfg)
	if err != nil {
		return err
	}
	a.srv = proxy.New(rt, a.metrics, a.log)
	a.metrics.ConfigLoaded(time.Now())

	hs := &http.Server{
		Addr:              cfg.Listen,
		Handler:           a.srv,
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		MaxHeaderBytes:    cfg.Server.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelDebug),
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	if cfg.TLS != nil {
		if err := a.loadCert(cfg.TLS); err != nil {
			return err
		}
		ln = tls.NewListener(ln, &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return a.cert.Load(), nil },
			NextProtos:     []string{"h2", "http/1.1"},
		})
	}

	var adm *admin.Server
	if cfg.AdminListen != "" {
		adm = admin.New(cfg.AdminListen, a.metrics, func() bool { return a.srv.Runtime() != nil })
		if err := adm.Start(); err != nil {
			return fmt.Errorf("starting admin listener: %w", err)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	w, err := reload.New(reload.Options{Path: a.path, Extra: a.extraFiles, Reload: a.reload, Logger: a.log})
	if err != nil {
		return err
	}
	go w.Run(ctx)
	defer w.Close()

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	a.log.Info("rlproxy serving", "listen", ln.Addr().String(), "admin", cfg.AdminListen, "store", cfg.Store.Type,
		"routes", len(cfg.Routes), "policies", len(cfg.Policies), "version", version)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Graceful shutdown: stop accepting, let in-flight and waiting
	// requests finish (within shutdown_timeout).
	a.mu.Lock()
	timeout := a.cfg.Server.ShutdownTimeout
	a.mu.Unlock()
	a.log.Info("shutting down", "timeout", timeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err = hs.Shutdown(sctx)
	if adm != nil {
		_ = adm.Shutdown(sctx)
	}
	a.mu.Lock()
	_ = a.st.Close()
	a.mu.Unlock()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}

// build makes the runtime for cfg, reusing the current store when cfg's
// store section is unchanged (state survives reloads, CONFIG-SPEC).
func (a *app) build(cfg *config.Config) (*proxy.Runtime, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st, cache := a.st, a.cache
	fresh := st == nil || !reflect.DeepEqual(cfg.Store, a.storeCfg)
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

func (a *app) runtime(cfg *config.Config, st store.Store) (*proxy.Runtime, error) {
	lim, err := policy.New(cfg, policy.Options{Store: st, Floor: a.floor, Metrics: a.metrics, LeasePrefix: a.lease})
	if err != nil {
		return nil, err
	}
	return proxy.NewRuntime(cfg, lim, a.metrics, a.log)
}

// newStore builds the store cfg names. Valkey is wrapped in the local
// over-limit cache and the circuit breaker; construction never needs the
// server to be up (a fleet starts in any order).
func (a *app) newStore(cfg *config.Config) (store.Store, *guard.OverLimitCache, error) {
	if cfg.Store.Type != "valkey" {
		ms := memory.New(memory.Options{MaxKeys: cfg.Store.MaxKeys})
		a.metrics.SetMemoryStore(ms)
		a.metrics.SetStoreUp(true)
		return ms, nil, nil
	}
	v := cfg.Store.Valkey
	var tc *tls.Config
	if v.TLS {
		var err error
		if tc, err = tlsConfig(v.CAFile); err != nil {
			return nil, nil, err
		}
	}
	vs, err := valkey.New(context.Background(), valkey.Options{
		Addrs: v.Addrs, Username: v.Username, Password: v.Password, TLS: tc,
		Timeout: v.Timeout, KeyPrefix: v.KeyPrefix, SentinelMaster: v.SentinelMaster,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to valkey: %w", err)
	}
	a.metrics.SetStoreUp(true)
	br := guard.NewBreaker(vs, guard.BreakerOptions{
		Failures: cfg.Store.Breaker.Failures,
		Cooldown: cfg.Store.Breaker.Cooldown,
		OnStateChange: func(open bool) {
			a.metrics.SetBreakerOpen(open)
			a.metrics.SetStoreUp(!open)
			if open {
				a.log.Warn("store unreachable: circuit breaker open, applying each policy's fail mode")
			} else {
				a.log.Info("store reachable again: circuit breaker closed")
			}
		},
	})
	cache := guard.NewOverLimitCache(br, guard.OverLimitOptions{MaxEntries: 100_000})
	return cache, cache, nil
}

// reload is the watcher's callback: load, validate, swap — or keep serving
// the old configuration and say why.
func (a *app) reload(reason string) {
	now := time.Now()
	cfg, err := config.Load(a.path)
	if err != nil {
		a.metrics.ConfigReload(false, now)
		a.log.Error("config reload refused; keeping the running configuration", "reason", reason, "err", err.Error())
		return
	}
	a.mu.Lock()
	same := a.cfg != nil && a.cfg.Digest == cfg.Digest
	old := a.cfg
	a.mu.Unlock()
	if same {
		a.log.Debug("config unchanged; not reloading", "reason", reason)
		return
	}
	if cfg.Listen != old.Listen || cfg.AdminListen != old.AdminListen {
		a.log.Warn("listen and admin_listen changes take effect on restart only")
	}
	if cfg.TLS != nil {
		if err := a.loadCert(cfg.TLS); err != nil {
			a.metrics.ConfigReload(false, now)
			a.log.Error("config reload refused; keeping the running configuration", "reason", reason, "err", err.Error())
			return
		}
	}
	rt, err := a.build(cfg)
	if err != nil {
		a.metrics.ConfigReload(false, now)
		a.log.Error("config reload refused; keeping the running configuration", "reason", reason, "err", err.Error())
		return
	}
	prev := a.srv.Swap(rt)
	a.metrics.ConfigReload(true, now)
	a.log.Info("config reloaded", "reason", reason, "routes", len(cfg.Routes), "policies", len(cfg.Policies))
	time.AfterFunc(cfg.Server.ShutdownTimeout, prev.Close)
}

// extraFiles are the files besides the config whose change is a reload:
// plans keys files.
func (a *app) extraFiles() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cfg == nil {
		return nil
	}
	var files []string
	for _, p := range a.cfg.Plans {
		if p.KeysFile != "" {
			files = append(files, p.KeysFile)
		}
	}
	if a.cfg.TLS != nil {
		files = append(files, a.cfg.TLS.CertFile, a.cfg.TLS.KeyFile)
	}
	return files
}

func (a *app) loadCert(t *config.TLS) error {
	c, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return fmt.Errorf("loading TLS certificate: %w", err)
	}
	a.cert.Store(&c)
	return nil
}

// tlsConfig is the client TLS configuration for Valkey: system roots, or
// the PEM certificates of caFile when set.
func tlsConfig(caFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return tc, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading valkey ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("valkey ca_file %s: no PEM certificate found", caFile)
	}
	tc.RootCAs = pool
	return tc, nil
}
