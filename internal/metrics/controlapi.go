package metrics

import "github.com/prometheus/client_golang/prometheus"

// controlActions are the values of rlproxy_control_changes_total's action
// label: the three kinds of entry a change sets, and its deletion.
var controlActions = []string{"ban", "exempt", "override", "delete"}

// newControlChanges registers rlproxy_control_changes_total on reg, each
// action at 0 from the start (so a rate over it has a series to read).
func newControlChanges(reg *prometheus.Registry) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rlproxy_control_changes_total",
		Help: "Changes made through the admin control API, by action (ban, exempt, override, delete).",
	}, []string{"action"})
	for _, a := range controlActions {
		c.WithLabelValues(a)
	}
	reg.MustRegister(c)
	return c
}

// ControlChange counts one change through the control API; action is one
// of ban, exempt, override, delete (others are counted under their name,
// which only a programming error gives).
func (m *Metrics) ControlChange(action string) { m.controlChanges.WithLabelValues(action).Inc() }
