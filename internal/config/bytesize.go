package config

import (
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxByteSize bounds every byte size (1 TiB): a larger one is a typo.
const maxByteSize = 1 << 40

// byteUnits are the suffixes a byte size accepts, each a power of 1024:
// nginx's k, m, g (either case) and the IEC KiB, MiB, GiB.
var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"k", 1 << 10}, {"K", 1 << 10}, {"m", 1 << 20}, {"M", 1 << 20}, {"g", 1 << 30}, {"G", 1 << 30},
}

// byteSizeShape is a byte count: a whole number, or one with a unit
// ("1MiB", nginx's "256k").
func byteSizeShape() schema {
	return schema{"anyOf": []any{
		schema{"type": "integer", "minimum": 0, "maximum": maxByteSize},
		schema{"type": "string", "pattern": `^[0-9]+(KiB|MiB|GiB|[kKmMgG])?$`},
	}}
}

// byteSizeVal is a byte size (see decoder.byteSize) stored in dst.
func (d *decoder) byteSizeVal(dst *int64) value {
	return value{byteSizeShape, func(n *yaml.Node, path string) {
		if v, ok := d.byteSize(n, path); ok {
			*dst = v
		}
	}}
}

// byteSize decodes a count of bytes in [0, 1 TiB]: a whole number, or one
// followed by KiB, MiB, GiB or nginx's k, m, g (1024-based, as nginx's
// client_max_body_size and limit_rate read them).
func (d *decoder) byteSize(n *yaml.Node, path string) (int64, bool) {
	const want = "want bytes: a whole number, or one with a unit such as 512k, 1MiB, 2g"
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!str") {
		d.errorf(n, path, "%s: %s", describe(n), want)
		return 0, false
	}
	s, mult := n.Value, int64(1)
	for _, u := range byteUnits {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = num, u.mult
			break
		}
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil || v < 0 || s == "" || s[0] == '+' {
		d.errorf(n, path, "%q: %s", n.Value, want)
		return 0, false
	}
	if v > maxByteSize/mult {
		d.errorf(n, path, "%q: must be at most 1 TiB", n.Value)
		return 0, false
	}
	return v * mult, true
}
