package config

import "testing"

// TestPlanSizes: the limits paid API plans are sold with validate
// (they used to be refused as past 2^47 units).
func TestPlanSizes(t *testing.T) {
	for _, p := range []string{
		"algorithm: fixed_window\n    limit: 10000000\n    window: 24h",
		"algorithm: fixed_window\n    limit: 1000000\n    window: 720h",
		"algorithm: fixed_window\n    limit: 100000\n    window: 8760h",
		"algorithm: fixed_window\n    limit: 1000000000000\n    window: 24h",
		"algorithm: fixed_window\n    limit: 1000000000000\n    window: 8784h",
		"algorithm: sliding_window\n    limit: 100000000\n    window: 24h",
		"algorithm: sliding_window\n    limit: 10000000\n    window: 720h",
		"algorithm: sliding_log\n    limit: 100000\n    window: 24h",
		"algorithm: token_bucket\n    rate: 1000000r/s\n    burst: 1000000000000",
		"algorithm: token_bucket\n    rate: 1r/d\n    burst: 1000000",
	} {
		src := "upstreams:\n  app: { builtin: echo }\npolicies:\n  p:\n    " + p + "\nroutes:\n  - name: r\n    upstream: app\n    policies: [p]\n"
		if _, err := ParseWith("x.yaml", []byte(src), LoadOptions{}); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
