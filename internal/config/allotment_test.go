package config

import (
	"testing"
	"time"
)

// TestAllotmentMistakes: an allotment on an algorithm that cannot keep a
// bound, or with a bad field, is reported at its FILE:LINE: field.
func TestAllotmentMistakes(t *testing.T) {
	const win = "algorithm: fixed_window\n    limit: 3\n    window: 1m\n    "
	for _, tt := range []struct{ name, policy, want string }{
		{"sliding log", "algorithm: sliding_log\n    limit: 3\n    window: 1m\n    allotment: {}", `x.yaml:8: policies.p.allotment: not for sliding_log: its entries are request times, not units: a slice spent locally would enter the log at other times than it was charged`},
		{"concurrency", "algorithm: concurrency\n    limit: 3\n    allotment: {}", `x.yaml:7: policies.p.allotment: not for concurrency: it counts requests in flight, which end at their own time: leases cannot be taken in advance`},
		{"leaky bucket", "algorithm: leaky_bucket\n    rate: 3r/s\n    allotment: {}", `x.yaml:7: policies.p.allotment: not for leaky_bucket: a delayed request's wait depends on the whole fleet's excess at its decision, which a local slice does not know (nodelay slices are not built yet)`},
		{"fraction", win + "allotment: { max_fraction: 0 }", `x.yaml:8: policies.p.allotment.max_fraction: 0: want a number greater than 0 and at most 1`},
		{"ttl", win + "allotment: { ttl: 0s }", `x.yaml:8: policies.p.allotment.ttl: "0s": must be greater than 0`},
		{"unknown", win + "allotment: { lease: 1s }", `x.yaml:8: policies.p.allotment.lease: unknown field "lease"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWith("x.yaml", []byte(settleYAML(tt.policy)), LoadOptions{})
			if err == nil || err.Error() != tt.want {
				t.Errorf("got  %v\nwant %s", err, tt.want)
			}
		})
	}
}

// TestAllotment: absent is off; present takes the defaults for the
// fields it leaves out.
func TestAllotment(t *testing.T) {
	cfg, err := ParseWith("x.yaml", []byte(settleYAML("algorithm: token_bucket\n    rate: 10r/s\n    burst: 5\n    allotment: { ttl: 250ms }")), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Policies["p"].Allotment; a == nil || a.MaxFraction != 0.5 || a.TTL != 250*time.Millisecond {
		t.Fatalf("allotment %+v, want {0.5 250ms}", a)
	}
	cfg, err = ParseWith("x.yaml", []byte(settleYAML("algorithm: fixed_window\n    limit: 3\n    window: 1m")), LoadOptions{})
	if err != nil || cfg.Policies["p"].Allotment != nil {
		t.Fatalf("absent: %+v, %v; want nil", cfg.Policies["p"].Allotment, err)
	}
}
