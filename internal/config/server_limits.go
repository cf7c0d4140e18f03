package config

import "time"

// Defaults of the client-side bounds (README.md, "Configuration reference").
const (
	// DefaultWriteTimeout is server.write_timeout's default: nginx's
	// send_timeout default.
	DefaultWriteTimeout = 60 * time.Second
	// DefaultShutdownDelay is server.shutdown_delay's default: longer than
	// the usual load balancer health-check interval, so it sees /readyz 503
	// before the listener closes.
	DefaultShutdownDelay = 5 * time.Second
	// maxConnectionsLimit bounds server.max_connections: beyond any fd limit.
	maxConnectionsLimit = 100_000_000
)

// serverLimits decodes server.write_timeout, server.max_connections and
// server.shutdown_delay (issue 21's client-side bounds and shutdown), with
// their defaults when absent.
func (l *loader) serverLimits(o object) {
	s := &l.c.Server
	s.WriteTimeout, s.ShutdownDelay = DefaultWriteTimeout, DefaultShutdownDelay
	for _, f := range []struct {
		name string
		dst  *time.Duration
	}{{"write_timeout", &s.WriteTimeout}, {"shutdown_delay", &s.ShutdownDelay}} {
		if n := o.get(f.name); n != nil {
			if v, ok := l.duration(n, o.field(f.name), true); ok {
				*f.dst = v
			}
		}
	}
	if n := o.get("max_connections"); n != nil {
		// 0 = derived from the open-file limit when serving.
		if v, ok := l.integer(n, o.field("max_connections"), 0, maxConnectionsLimit); ok {
			s.MaxConnections = int(v)
		}
	}
}
