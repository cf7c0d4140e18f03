package config

import (
	"time"

	"rlproxy/internal/algo"
)

// Allotment is a policy's `allotment:`: an instance may take a slice of
// a hot key's allowance from the shared store and decide from it locally
// (package allotment).
type Allotment struct {
	// MaxFraction is the largest part of what is left that one slice
	// takes, in (0, 1].
	MaxFraction float64
	// TTL is how long a slice may be spent, from the local send of its
	// fetch; then its unused units go back.
	TTL time.Duration
}

// Allotment defaults: half of what is left, spent within a second.
const (
	defaultMaxFraction = "0.5"
	defaultAllotTTL    = time.Second
)

// allotmentSection is a policy's `allotment:`; present turns it on.
func (d *decoder) allotmentSection(p *Policy) *section {
	a := &Allotment{}
	return &section{optional: true, fields: []field{
		{name: "max_fraction", def: defaultMaxFraction, value: d.ratioVal(&a.MaxFraction),
			doc: "The largest part of a key's remaining allowance one slice takes, in (0, 1]."},
		{name: "ttl", def: defaultAllotTTL.String(), value: d.durationVal(&a.TTL, false),
			doc: "How long a slice may be spent, from the local send of its fetch; its unused units then go back. It loosens a bucket's burst by at most rate × ttl."},
	}, check: func(o object) {
		if a.TTL > 0 && a.TTL < time.Millisecond {
			d.errorf(o.get("ttl"), o.field("ttl"), "%v: want at least 1ms", a.TTL)
		}
		p.Allotment = a
	}}
}

// allotmentValid refuses an allotment on an algorithm whose bound it
// cannot keep (algo.Limit.AllotmentRefusal), at the allotment's key.
func (d *decoder) allotmentValid(o object, p *Policy) {
	if p.Allotment == nil || p.Limit.Kind == 0 {
		return
	}
	if why := p.Limit.AllotmentRefusal(); why != "" {
		d.errorf(o.keys["allotment"], o.field("allotment"), "not for %s: %s", algo.Describe(p.Limit.Kind).Name, why)
	}
}
