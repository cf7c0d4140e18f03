package config

import (
	"slices"

	"gopkg.in/yaml.v3"
)

// ProblemTypes is `response.problem_types`: which type URI a refusal's
// problem details (RFC 9457) carry.
type ProblemTypes uint8

const (
	// ProblemTypesRLProxy keeps rlproxy's URN, urn:rlproxy:problem:rate-limited.
	ProblemTypesRLProxy ProblemTypes = iota
	// ProblemTypesIETF uses the ratelimit-headers draft-11's
	// https://iana.org/assignments/http-problem-types#quota-exceeded
	// (requested from IANA by the draft, not yet registered).
	ProblemTypesIETF
)

// problemTypesVal is `response.problem_types`: rlproxy or ietf, stored in dst.
func (d *decoder) problemTypesVal(dst *ProblemTypes) value {
	names := []string{"rlproxy", "ietf"} // in ProblemTypes order
	return value{func() schema { return enumShape(names...) }, func(n *yaml.Node, path string) {
		if s, ok := d.oneOf(n, path, names...); ok {
			*dst = ProblemTypes(slices.Index(names, s))
		}
	}}
}
