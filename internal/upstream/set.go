package upstream

import (
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"sync"
	"time"

	"rlproxy/internal/config"
	"rlproxy/internal/metrics"
)

// Options configure a Set.
type Options struct {
	// NewTransport builds the connection pool of one server of u (called
	// once per server; a reload that keeps the server keeps its transport).
	NewTransport func(u *config.Upstream, server *url.URL) (Transport, error)
	// Metrics receives the upstream series; nil: metrics.Discard().
	Metrics *metrics.Metrics
	// Log receives health transitions; nil discards them.
	Log *slog.Logger
	// Now is the clock of passive health (default time.Now).
	Now func() time.Time
}

// Set is every upstream server of the running configuration, kept across
// reloads. Safe for concurrent use.
type Set struct {
	opts Options

	mu      sync.Mutex
	servers map[string]*Server // by identity key
	pools   []*Pool            // of the last Update, by upstream name
}

// NewSet returns an empty Set; it reports
// rlproxy_upstream_server_up of the last Update's servers.
func NewSet(o Options) *Set {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Metrics == nil {
		o.Metrics = metrics.Discard()
	}
	s := &Set{opts: o, servers: map[string]*Server{}}
	o.Metrics.SetUpstreamServers(s.states)
	return s
}

// Pools are the pools of one configuration by upstream name.
type Pools map[string]*Pool

// Update builds the pools of cfg. A server whose upstream name, URL and
// transport settings are unchanged is kept with its connections, health
// state and prober (restarted if its health_check changed); removed
// servers are closed. On error nothing changes.
func (s *Set) Update(cfg *config.Config) (Pools, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := map[string]*Server{}
	var created []*Server
	fail := func(err error) (Pools, error) {
		for _, sv := range created {
			sv.transport.Close()
		}
		return nil, err
	}
	pools := Pools{}
	for _, name := range slices.Sorted(maps.Keys(cfg.Upstreams)) {
		u := cfg.Upstreams[name]
		if u.Builtin != "" {
			continue
		}
		servers := make([]*Server, len(u.Servers))
		for i, us := range u.Servers {
			key := serverKey(u, us.URL)
			sv := s.servers[key]
			if sv == nil {
				tr, err := s.opts.NewTransport(u, us.URL)
				if err != nil {
					return fail(fmt.Errorf("upstream %q server %s: %w", name, us.URL.Host, err))
				}
				sv = newServer(name, us.URL, tr, key)
				created = append(created, sv)
			}
			next[key], servers[i] = sv, sv
		}
		p, err := newPool(u, servers, cfg.JWT, cfg.Store.HashSecret, &s.opts)
		if err != nil {
			return fail(fmt.Errorf("upstream %q: %w", name, err))
		}
		pools[name] = p
		for _, sv := range servers {
			s.probe(sv, u.HealthCheck)
		}
	}
	for key, sv := range s.servers {
		if next[key] == nil {
			s.retire(sv)
		}
	}
	s.servers = next
	s.pools = s.pools[:0]
	for _, name := range slices.Sorted(maps.Keys(pools)) {
		s.pools = append(s.pools, pools[name])
	}
	return pools, nil
}

// probe (re)starts sv's prober for hc, or stops it when hc is nil.
func (s *Set) probe(sv *Server, hc *config.HealthCheck) {
	if sv.prober != nil && hc != nil && sv.prober.hc == *hc {
		return
	}
	if sv.prober != nil {
		sv.prober.stop()
		sv.prober = nil
	}
	if hc == nil {
		sv.activeDown.Store(false) // no check any more: nothing holds it out
		return
	}
	sv.prober = startProber(sv, *hc, s.opts.Log)
}

// retire stops a removed server's prober and closes its idle connections
// (requests still in flight on it finish; their connections close after).
func (s *Set) retire(sv *Server) {
	if sv.prober != nil {
		sv.prober.stop()
		sv.prober = nil
	}
	sv.transport.Close()
}

// Close stops every prober and closes every connection pool.
func (s *Set) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sv := range s.servers {
		s.retire(sv)
	}
	s.servers, s.pools = map[string]*Server{}, nil
}

// states reports each server of the last Update (metrics.ServerStates).
func (s *Set) states(yield func(upstream, server string, up bool)) {
	s.mu.Lock()
	pools := slices.Clone(s.pools)
	s.mu.Unlock()
	now := s.opts.Now()
	for _, p := range pools {
		for _, sv := range p.servers {
			yield(p.Name, sv.Label, sv.Up(now))
		}
	}
}

// serverKey identifies a server across reloads: its upstream, its URL and
// every setting of the upstream but the pool's own (a change of ca_file or
// a timeout builds a new transport).
func serverKey(u *config.Upstream, server *url.URL) string {
	c := *u
	c.URL, c.Servers, c.Balance, c.HashKey, c.MaxFails, c.FailTimeout = nil, nil, "", config.KeySpec{}, 0, 0
	c.FailStatuses, c.HealthCheck, c.Retries, c.RetryTimeout = nil, nil, 0, 0
	return fmt.Sprintf("%s\x00%s\x00%#v", u.Name, server.String(), c)
}
