package config

import "time"

// Defaults of the client-side bounds (docs/reference/config.md).
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
