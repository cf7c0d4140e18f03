package metrics

import "github.com/prometheus/client_golang/prometheus"

// Listeners holds the client-connection collectors of rlproxy's listeners
// (server.max_connections and server.write_timeout, docs/reference/config.md), labelled by listener ("public"). Build it
// once per registry with NewListeners.
type Listeners struct {
	open          *prometheus.GaugeVec
	refused       *prometheus.CounterVec
	writeTimeouts *prometheus.CounterVec
}

// NewListeners builds the connection collectors and registers them on reg.
// It panics if reg already holds them (one Listeners per registry).
func NewListeners(reg prometheus.Registerer) *Listeners {
	l := &Listeners{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rlproxy_connections_open",
			Help: "Client connections currently open, by listener (server.max_connections caps it).",
		}, []string{"listener"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rlproxy_connections_refused_total",
			Help: "Client connections closed at accept because server.max_connections were open.",
		}, []string{"listener"}),
		writeTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rlproxy_write_timeouts_total",
			Help: "Client connections cut because one write blocked longer than server.write_timeout.",
		}, []string{"listener"}),
	}
	reg.MustRegister(l.open, l.refused, l.writeTimeouts)
	return l
}

// ListenerCounters are one listener's resolved collectors: the accept and
// write paths only call Inc/Dec, which do not allocate.
type ListenerCounters struct {
	// Open is the number of open client connections.
	Open prometheus.Gauge
	// Refused counts connections closed at accept, over the cap.
	Refused prometheus.Counter
	// WriteTimeouts counts connections cut by server.write_timeout.
	WriteTimeouts prometheus.Counter
}

// For resolves the collectors of the listener named name.
func (l *Listeners) For(name string) ListenerCounters {
	return ListenerCounters{
		Open:          l.open.WithLabelValues(name),
		Refused:       l.refused.WithLabelValues(name),
		WriteTimeouts: l.writeTimeouts.WithLabelValues(name),
	}
}
