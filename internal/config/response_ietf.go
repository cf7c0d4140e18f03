package config

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

// responseIETF decodes the draft-11 fields of `response:`: partition_key
// (boolean, default false) and problem_types (rlproxy or ietf, default
// rlproxy).
func (l *loader) responseIETF(o object) {
	r := &l.c.Response
	if n := o.get("partition_key"); n != nil {
		r.PartitionKey, _ = l.boolean(n, o.field("partition_key"))
	}
	if n := o.get("problem_types"); n != nil {
		if s, ok := l.oneOf(n, o.field("problem_types"), "rlproxy", "ietf"); ok && s == "ietf" {
			r.ProblemTypes = ProblemTypesIETF
		}
	}
}
