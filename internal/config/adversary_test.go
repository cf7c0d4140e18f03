package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// advBase is a valid config tail: one echo upstream and one route on
// policy api, which each test defines.
const advBase = `
upstreams:
  demo: { builtin: echo }
routes:
  - { name: a, match: { path_prefix: / }, upstream: demo, policies: [api] }
`

// TestMergeCycleIsNotACrash: a mapping that merges itself (`&a {<<: *a}`)
// once overflowed the stack in addFields — a fatal error no recover catches,
// so a reload to such a file killed the running proxy. Merging a mapping
// again adds nothing, so the policy loads with its explicit fields.
func TestMergeCycleIsNotACrash(t *testing.T) {
	t.Parallel()
	src := "policies:\n  api: &a { algorithm: token_bucket, rate: 30r/m, burst: 5, <<: *a }\n" + advBase
	c, err := ParseWith("cycle.yaml", []byte(src), LoadOptions{})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	p := c.Policies["api"]
	if p == nil || p.Limit.Count != 30 || p.Limit.Period != 60_000 || p.Limit.Burst != 5 {
		t.Fatalf("policy api = %+v, want 30 per 60000 ms, burst 5", p)
	}
}

// TestMergeBombIsLinear: 40 levels of `&xN {<<: [*xN-1, *xN-1]}` once made
// addFields walk 2^40 mappings (a hung validate or reload). Each mapping is
// now merged at most once per object, so it loads at once, and the fields
// merged from x0 reach the policy that merges x39.
func TestMergeBombIsLinear(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("policies:\n  x0: &x0 { algorithm: token_bucket, rate: 1r/s, burst: 1 }\n")
	for i := 1; i < 40; i++ {
		fmt.Fprintf(&b, "  x%d: &x%d { <<: [*x%d, *x%d] }\n", i, i, i-1, i-1)
	}
	b.WriteString("  api: { <<: *x39, burst: 7 }\n")
	b.WriteString(advBase)
	start := time.Now()
	c, err := ParseWith("bomb.yaml", []byte(b.String()), LoadOptions{})
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Parse took %v, want well under 2s", d)
	}
	if err != nil {
		var errs *Errors
		errors.As(err, &errs)
		t.Fatalf("Parse: %v", err)
	}
	p := c.Policies["api"]
	if p == nil || p.Limit.Count != 1 || p.Limit.Period != 1000 || p.Limit.Burst != 7 {
		t.Fatalf("policy api = %+v, want 1 per 1000 ms, burst 7 (explicit wins)", p)
	}
}

// TestTrustEveryoneWarns: trusted_proxies 0.0.0.0/0 or ::/0 lets any
// client choose its own address (and ip key) through the header — a
// careless operator's silent bypass of every ip limit. It is valid, but
// validate and reloads must say so.
func TestTrustEveryoneWarns(t *testing.T) {
	t.Parallel()
	src := "real_ip: { trusted_proxies: [\"0.0.0.0/0\", \"10.0.0.0/8\", \"::/0\"] }\n" +
		"policies:\n  api: { algorithm: token_bucket, rate: 1r/s, burst: 1 }\n" + advBase
	c, err := ParseWith("trust.yaml", []byte(src), LoadOptions{})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var got []string
	for _, w := range c.Warnings {
		got = append(got, w.String())
	}
	want := []string{
		"trust.yaml:1: real_ip.trusted_proxies: 0.0.0.0/0 trusts every address: any client can set its own address with the header and escape ip-keyed limits",
		"trust.yaml:1: real_ip.trusted_proxies: ::/0 trusts every address: any client can set its own address with the header and escape ip-keyed limits",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
