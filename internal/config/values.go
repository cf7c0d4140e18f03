package config

import (
	"net/netip"
	"time"

	"gopkg.in/yaml.v3"
)

// The values below pair a decoder helper with its JSON Schema and a
// destination, so a table entry says once what a field holds. A value
// that fails its check leaves the destination (its default) unchanged.

// durationVal is a duration (see decoder.duration) stored in dst.
func (d *decoder) durationVal(dst *time.Duration, zeroOK bool) value {
	return value{func() schema { return durationShape(zeroOK) }, func(n *yaml.Node, path string) {
		if v, ok := d.duration(n, path, zeroOK); ok {
			*dst = v
		}
	}}
}

// intVal is a whole number within [lo, hi] stored in dst.
func (d *decoder) intVal(dst *int, lo, hi int64) value {
	return value{func() schema { return intShape(lo, hi) }, func(n *yaml.Node, path string) {
		if v, ok := d.integer(n, path, lo, hi); ok {
			*dst = int(v)
		}
	}}
}

// boolVal is true or false stored in dst.
func (d *decoder) boolVal(dst *bool) value {
	return value{boolShape, func(n *yaml.Node, path string) {
		if v, ok := d.boolean(n, path); ok {
			*dst = v
		}
	}}
}

// strVal is any string stored in dst.
func (d *decoder) strVal(dst *string) value {
	return value{stringShape, func(n *yaml.Node, path string) {
		if v, ok := d.str(n, path); ok {
			*dst = v
		}
	}}
}

// enumVal is one of choices stored in dst.
func (d *decoder) enumVal(dst *string, choices ...string) value {
	return value{func() schema { return enumShape(choices...) }, func(n *yaml.Node, path string) {
		if v, ok := d.oneOf(n, path, choices...); ok {
			*dst = v
		}
	}}
}

// prefixesVal is a list of CIDRs or addresses stored in dst.
func (d *decoder) prefixesVal(dst *[]netip.Prefix) value {
	return value{func() schema { return listShape(stringShape(), false) }, func(n *yaml.Node, path string) {
		*dst, _ = d.prefixes(n, path)
	}}
}

// secretVal is the name of an environment variable holding a secret of at
// least minLen bytes, stored in dst.
func (d *decoder) secretVal(dst *[]byte, minLen int) value {
	return value{envNameShape, func(n *yaml.Node, path string) {
		if s, ok := d.secretEnv(n, path, minLen); ok {
			*dst = []byte(s)
		}
	}}
}

// listenVal is a listen address HOST:PORT, or "" for none, stored in dst.
func (d *decoder) listenVal(dst *string) value {
	return value{listenShape, func(n *yaml.Node, path string) {
		if s, ok := d.str(n, path); ok && s == "" {
			*dst = ""
		} else if ok {
			if s, ok := d.hostPort(n, path); ok {
				*dst = s
			}
		}
	}}
}

// checked is a value whose decoding the section's check does (rules across
// fields): the table gives only its shape.
func checked(shape func() schema) value { return value{shape: shape} }
