package config

import (
	"strconv"

	"gopkg.in/yaml.v3"
)

// ratioVal is a number in (0, 1] stored in dst (store.breaker.failure_ratio).
func (d *decoder) ratioVal(dst *float64) value {
	return value{func() schema { return schema{"type": "number", "exclusiveMinimum": 0, "maximum": 1} }, func(n *yaml.Node, path string) {
		if v, ok := d.ratio(n, path); ok {
			*dst = v
		}
	}}
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
