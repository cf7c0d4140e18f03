package server

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rlproxy/internal/accesslog"
	"rlproxy/internal/config"
	"rlproxy/internal/proxy"
	"rlproxy/internal/store"
	"rlproxy/internal/store/guard"
)

// generation is everything built from one configuration (provision, in
// provision.go): the config, the request path's Runtime over its store,
// the access log and the TLS material. A reload builds the next one,
// swaps its parts in, then publishes it; the one it replaces is closed
// once no request that began under it is running, or at the latest
// server.shutdown_timeout after the reload, so an hours-long WebSocket
// does not keep every old generation alive.
//
// Generations close in the order they were published: a request holds
// the generation current when it began, but the proxy may have loaded a
// newer Runtime already (the parts swap before the generation pointer), so
// a generation must outlive every older one.
type generation struct {
	cfg    *config.Config
	rt     *proxy.Runtime
	store  *shared[storeParts]
	access *shared[*accesslog.Logger] // nil when log.access is off
	// accessCfg is the log.access of access (the running one's when the
	// file's could not be opened).
	accessCfg config.AccessLog
	tls       *serverTLS // nil without tls

	// refs counts the requests using it, plus one while it is current;
	// at 0 it is idle for good (acquire never revives it).
	refs   atomic.Int64
	idle   chan struct{} // closed when refs reaches 0
	closed chan struct{} // closed once its parts are closed
	// older is the previous generation's closed channel (nil for the
	// first): the channel, not the generation, so a chain of retired
	// configurations is not kept reachable.
	older <-chan struct{}
}

// storeParts is the store of one or more generations: the decorated store
// the policies use and, on Valkey, its over-limit cache (nil otherwise).
type storeParts struct {
	st    store.Store
	cache *guard.OverLimitCache
}

func newGeneration(cfg *config.Config) *generation {
	g := &generation{cfg: cfg, idle: make(chan struct{}), closed: make(chan struct{})}
	g.refs.Store(1)
	return g
}

// acquire counts a request using g; false when g is already idle for good.
func (g *generation) acquire() bool {
	for {
		n := g.refs.Load()
		if n == 0 {
			return false
		}
		if g.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release ends one use of g (a request, or being current).
func (g *generation) release() {
	if g.refs.Add(-1) == 0 {
		close(g.idle)
	}
}

// close closes what g holds alone and releases what it shares with
// other generations; then it runs done (nil: nothing) and signals
// g.closed, so whoever waits for that sees done's effect.
func (g *generation) close(done func()) {
	if g.rt != nil {
		g.rt.Close()
	}
	if g.store != nil {
		g.store.release()
	}
	if g.access != nil {
		g.access.release()
	}
	if done != nil {
		done()
	}
	close(g.closed)
}

// shared is a part kept across reloads while its section is unchanged (the
// store, the access log): each generation holding it counts once, and the
// last to let go closes it.
type shared[T any] struct {
	v      T
	refs   atomic.Int32
	finish func(T)
}

func newShared[T any](v T, finish func(T)) *shared[T] {
	s := &shared[T]{v: v, finish: finish}
	s.refs.Store(1)
	return s
}

// retain counts one more holder; only a holder that is not closed yet
// may call it.
func (s *shared[T]) retain() *shared[T] {
	s.refs.Add(1)
	return s
}

func (s *shared[T]) release() {
	if s.refs.Add(-1) == 0 {
		s.finish(s.v)
	}
}

// generations is the current generation and the retired ones still open.
type generations struct {
	cur      atomic.Pointer[generation]
	retained prometheus.Gauge // rlproxy_config_generations_retained
	log      *slog.Logger
	stop     chan struct{} // closed at shutdown: retired generations close at once
	stopOnce sync.Once
}

func newGenerations(first *generation, retained prometheus.Gauge, log *slog.Logger) *generations {
	gs := &generations{retained: retained, log: log, stop: make(chan struct{})}
	gs.cur.Store(first)
	return gs
}

// current is the generation new requests start under.
func (gs *generations) current() *generation { return gs.cur.Load() }

// acquire returns the current generation, counted as used until the
// caller releases it. After shutdown it returns nil: nothing is counted any more.
func (gs *generations) acquire() *generation {
	for {
		g := gs.cur.Load()
		if g.acquire() {
			return g
		}
		if gs.cur.Load() == g { // the current one idle: shut down
			return nil
		}
	}
}

// publish makes g current and retires the one it replaces, closing it when
// idle or after capAfter (server.shutdown_timeout), whichever comes first.
// Only one publish runs at a time (App.Reload's lock).
func (gs *generations) publish(g *generation, capAfter time.Duration) {
	old := gs.cur.Load()
	g.older = old.closed
	gs.cur.Store(g)
	gs.retire(old, capAfter)
}

func (gs *generations) retire(old *generation, capAfter time.Duration) {
	gs.retained.Inc()
	old.release() // no longer current
	go func() {
		var capped <-chan time.Time // nil at shutdown: stop is closed
		if capAfter > 0 {
			t := time.NewTimer(capAfter)
			defer t.Stop()
			capped = t.C
		}
		select {
		case <-old.idle:
		case <-gs.stop:
		case <-capped:
			gs.log.Warn("closing a replaced configuration while requests that began under it still run (server.shutdown_timeout)",
				"requests", old.refs.Load(), "shutdown_timeout", capAfter.String())
		}
		if old.older != nil {
			<-old.older
		}
		old.close(gs.retained.Dec) // before shutdown's wait on closed ends
	}()
}

// shut reports whether shutdown has begun: nothing may be published then.
func (gs *generations) shut() bool {
	select {
	case <-gs.stop:
		return true
	default:
		return false
	}
}

// shutdown closes every generation, the current one last, without waiting
// for requests: the caller has drained them (or given up) already. It
// runs under App.Reload's lock, so no publish races it.
func (gs *generations) shutdown() {
	gs.stopOnce.Do(func() {
		close(gs.stop)
		last := gs.cur.Load()
		gs.retire(last, 0)
		<-last.closed
	})
}
