package config

import (
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// Breaker defaults of the fields that judge a failure ratio (README,
// "store.breaker"): they are the circuit's own defaults (package guard),
// written here so that a loaded Config says what runs.
const (
	defaultFailureRatio = 0.5
	defaultWindow       = 10 * time.Second
	defaultMinCalls     = 20
)

// breakerRatio decodes store.breaker's failure_ratio, window and
// min_calls (o is the `breaker:` object, possibly empty) and sets the
// defaults of those absent.
func (l *loader) breakerRatio(o object) {
	b := &l.c.Store.Breaker
	b.FailureRatio, b.Window, b.MinCalls = defaultFailureRatio, defaultWindow, defaultMinCalls
	if n := o.get("failure_ratio"); n != nil {
		if v, ok := l.ratio(n, o.field("failure_ratio")); ok {
			b.FailureRatio = v
		}
	}
	if n := o.get("window"); n != nil {
		if v, ok := l.duration(n, o.field("window"), false); ok {
			b.Window = v
		}
	}
	if n := o.get("min_calls"); n != nil {
		if v, ok := l.integer(n, o.field("min_calls"), 1, 1_000_000); ok {
			b.MinCalls = int(v)
		}
	}
}

// ratio decodes a number in (0, 1] ("0.5", "1").
func (d *decoder) ratio(n *yaml.Node, path string) (float64, bool) {
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!float" && n.ShortTag() != "!!int") {
		d.errorf(n, path, "%s: want a number greater than 0 and at most 1", describe(n))
		return 0, false
	}
	v, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || !(v > 0 && v <= 1) {
		d.errorf(n, path, "%s: want a number greater than 0 and at most 1", n.Value)
		return 0, false
	}
	return v, true
}
