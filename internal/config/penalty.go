package config

import (
	"time"

	"rlproxy/internal/algo"
)

// Penalty is a policy's `penalty:`, a penalty box (Cloudflare's
// mitigation timeout, HAProxy's gpc and expire): after After refusals
// of one client within Within, the policy refuses the client for For.
type Penalty struct {
	After  int
	Within time.Duration
	For    time.Duration
}

// penaltySection is a policy's `penalty:`; present turns it on.
func (d *decoder) penaltySection(p *Policy) *section {
	pe := &Penalty{}
	return &section{optional: true, fields: []field{
		{name: "after", need: "required: the refusals that put a client in the box", value: d.intVal(&pe.After, 1, algo.MaxLogCount),
			doc: "Refusals of one client by this policy within `within` that put it in the penalty box (1 to 100000)."},
		{name: "within", need: "required: the window the refusals are counted in", value: d.durationVal(&pe.Within, false),
			doc: "The sliding window the refusals are counted in."},
		{name: "for", need: "required: how long the box refuses the client", value: d.durationVal(&pe.For, false),
			doc: "How long the client is refused once in the box (it does not extend itself while it runs)."},
	}, check: func(o object) {
		for _, f := range [...]struct {
			name string
			v    time.Duration
		}{{"within", pe.Within}, {"for", pe.For}} {
			if o.has(f.name) && (f.v < time.Millisecond || f.v.Milliseconds() > algo.MaxPeriod) {
				d.errorf(o.get(f.name), o.field(f.name), "%v: want 1ms to 366 days", f.v)
				return
			}
		}
		if pe.After > 0 && pe.Within > 0 && pe.For > 0 {
			p.Penalty = pe
		}
	}}
}
