package metrics

import "github.com/prometheus/client_golang/prometheus"

// Listeners holds the client-connection collectors of rlproxy's listeners
// (server.max_connections, server.max_connections_per_client and
// server.write_timeout, docs/reference/config.md), labelled by listener
// ("public"). Build it once per registry with NewListeners.
type Listeners struct {
	open          *prometheus.GaugeVec
	refused       *prometheus.CounterVec
	clientRefused *prometheus.CounterVec
	reclaimed     *prometheus.CounterVec
	writeTimeouts *prometheus.CounterVec
}

// Reasons of rlproxy_connections_reclaimed_total: what the closed
// connection was doing when a new one needed its place.
const (
	// ReclaimIdle: waiting in keep-alive between requests (HTTP/2: no
	// stream open).
	ReclaimIdle = "idle"
	// ReclaimNoRequest: accepted, but no complete request head (HTTP/2:
	// no connection preface) received yet.
	ReclaimNoRequest = "no_request"
)

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
		clientRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rlproxy_connections_per_client_refused_total",
			Help: "Client connections closed because their address (IPv6: its /64) already had server.max_connections_per_client open.",
		}, []string{"listener"}),
		reclaimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rlproxy_connections_reclaimed_total",
			Help: "Client connections closed, oldest first, to admit a new one at server.max_connections, by reason (idle: keep-alive between requests; no_request: no complete request head yet).",
		}, []string{"listener", "reason"}),
		writeTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rlproxy_write_timeouts_total",
			Help: "Client connections cut because one write blocked longer than server.write_timeout.",
		}, []string{"listener"}),
	}
	reg.MustRegister(l.open, l.refused, l.clientRefused, l.reclaimed, l.writeTimeouts)
	return l
}

// ListenerCounters are one listener's resolved collectors: the accept and
// write paths only call Inc/Dec, which do not allocate.
type ListenerCounters struct {
	// Open is the number of open client connections.
	Open prometheus.Gauge
	// Refused counts connections closed at accept, over the cap.
	Refused prometheus.Counter
	// ClientRefused counts connections closed over the per-client cap.
	ClientRefused prometheus.Counter
	// ReclaimedIdle and ReclaimedNoRequest count connections closed to
	// admit a new one at the cap (ReclaimIdle, ReclaimNoRequest).
	ReclaimedIdle, ReclaimedNoRequest prometheus.Counter
	// WriteTimeouts counts connections cut by server.write_timeout.
	WriteTimeouts prometheus.Counter
}

// For resolves the collectors of the listener named name.
func (l *Listeners) For(name string) ListenerCounters {
	return ListenerCounters{
		Open:          l.open.WithLabelValues(name),
		Refused:       l.refused.WithLabelValues(name),
		ClientRefused: l.clientRefused.WithLabelValues(name),

		ReclaimedIdle:      l.reclaimed.WithLabelValues(name, ReclaimIdle),
		ReclaimedNoRequest: l.reclaimed.WithLabelValues(name, ReclaimNoRequest),
		WriteTimeouts:      l.writeTimeouts.WithLabelValues(name),
	}
}
