package config

import (
	"strings"
	"testing"
)

// TestResponseIETF: response.partition_key and response.problem_types,
// their defaults (false, rlproxy) and errors naming file:line:field.
func TestResponseIETF(t *testing.T) {
	base := "upstreams:\n  app: { builtin: echo }\nroutes:\n  - { name: r, upstream: app }\n"
	cfg, err := ParseWith("x.yaml", []byte(base), LoadOptions{})
	if err != nil || cfg.Response.PartitionKey || cfg.Response.ProblemTypes != ProblemTypesRLProxy {
		t.Fatalf("defaults: %+v, %v", cfg.Response, err)
	}
	cfg, err = ParseWith("x.yaml", []byte(base+"response:\n  partition_key: true\n  problem_types: ietf\n"), LoadOptions{})
	if err != nil || !cfg.Response.PartitionKey || cfg.Response.ProblemTypes != ProblemTypesIETF {
		t.Fatalf("set: %+v, %v", cfg.Response, err)
	}
	for _, c := range []struct{ src, want string }{
		{"response:\n  partition_key: yes please\n", `x.yaml:6: response.partition_key: "yes please": want true or false`},
		{"response:\n  problem_types: rfc\n", `x.yaml:6: response.problem_types: "rfc": want rlproxy or ietf`},
	} {
		_, err := ParseWith("x.yaml", []byte(base+c.src), LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %s", c.src, err, c.want)
		}
	}
}
