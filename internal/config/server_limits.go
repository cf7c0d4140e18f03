package config

import (
	"time"

	"gopkg.in/yaml.v3"
)

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

// optIntVal is a whole number within [lo, hi] stored in a new *dst; an
// absent field leaves *dst nil (a default derived elsewhere).
func (d *decoder) optIntVal(dst **int, lo, hi int64) value {
	return value{func() schema { return intShape(lo, hi) }, func(n *yaml.Node, path string) {
		if v, ok := d.integer(n, path, lo, hi); ok {
			i := int(v)
			*dst = &i
		}
	}}
}
