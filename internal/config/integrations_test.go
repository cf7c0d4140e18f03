package config

import (
	"errors"
	"strings"
	"testing"
)

// integrationsBase is a valid file the cases below add one section to.
const integrationsBase = `listen: 127.0.0.1:8080
real_ip: {trusted_proxies: [127.0.0.1]}
upstreams: {app: {builtin: echo}}
policies:
  api: {algorithm: fixed_window, limit: 5, window: 1m}
  pool: {algorithm: concurrency, limit: 2}
routes:
  - {name: api, upstream: app, policies: [api]}
`

// TestIntegrationsProblems: each mistake in forward_auth and envoy_rls is
// reported as FILE:LINE: field: message.
func TestIntegrationsProblems(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"forward_auth: {listen: 127.0.0.1:8080}",
			`x.yaml:9: forward_auth.listen: "127.0.0.1:8080": must not share the listen listener "127.0.0.1:8080"`},
		{"forward_auth: {listen: \"127.0.0.1:9090\"}",
			`x.yaml:9: forward_auth.listen: "127.0.0.1:9090": must not share the admin_listen listener "127.0.0.1:9090"`},
		{"forward_auth: {listen: 8082}",
			`x.yaml:9: forward_auth.listen: "8082": want HOST:PORT, e.g. 127.0.0.1:8080 or :8080`},
		{"forward_auth: {listen: 127.0.0.1:8082, refused_status: 200}",
			`x.yaml:9: forward_auth.refused_status: 200: want a whole number from 400 to 599`},
		{"# no trusted proxies\nforward_auth: {listen: 127.0.0.1:8082}",
			`x.yaml:10: forward_auth.listen: needs real_ip.trusted_proxies: only the proxies listed there are answered (with none, every caller gets 403)`},
		{"forward_auth: {lisen: 127.0.0.1:8082}",
			`x.yaml:9: forward_auth.lisen: unknown field "lisen"; did you mean "listen"?`},
		{"envoy_rls: {listen: 127.0.0.1:8081}",
			`x.yaml:9: envoy_rls.mappings: required: at least one mapping from a domain and descriptor to policies`},
		{"forward_auth: {listen: 127.0.0.1:8081}\nenvoy_rls: {listen: 127.0.0.1:8081, mappings: [{name: m, domain: d, descriptor: [{key: k}], policies: [api]}]}",
			`x.yaml:10: envoy_rls.listen: "127.0.0.1:8081": must not share the forward_auth listener "127.0.0.1:8081"`},
		{"envoy_rls:\n  mappings:\n    - {name: api, domain: d, descriptor: [{key: k}], policies: [api]}",
			`x.yaml:11: envoy_rls.mappings[0].name: "api": a route has this name; metrics label both by it`},
		{"envoy_rls:\n  mappings:\n    - {name: m, descriptor: [{key: k}], policies: [api]}",
			`x.yaml:11: envoy_rls.mappings[0].domain: required: the RateLimitRequest domain (Envoy's rate limit filter domain)`},
		{"envoy_rls:\n  mappings:\n    - {name: m, domain: d, descriptor: [], policies: [api]}",
			`x.yaml:11: envoy_rls.mappings[0].descriptor: required: at least one entry`},
		{"envoy_rls:\n  mappings:\n    - {name: m, domain: d, descriptor: [{value: v}], policies: [api]}",
			`x.yaml:11: envoy_rls.mappings[0].descriptor[0].key: required: the descriptor entry's key`},
		{"envoy_rls:\n  mappings:\n    - {name: m, domain: d, descriptor: [{key: k}], policies: [apj]}",
			`x.yaml:11: envoy_rls.mappings[0].policies[0]: unknown policy "apj"; did you mean "api"?`},
		{"envoy_rls:\n  mappings:\n    - {name: m, domain: d, descriptor: [{key: k}], policies: [api, pool]}",
			`x.yaml:11: envoy_rls.mappings[0].policies[1]: policy "pool" is a concurrency limit (its lease ends with the response), and the rate limit service never sees the response`},
		{"envoy_rls:\n  mappings:\n    - {name: m, domain: d, descriptor: [{key: k}], policies: [api]}\n    - {name: m, domain: e, descriptor: [{key: k}], policies: [api]}",
			`x.yaml:12: envoy_rls.mappings[1].name: "m": duplicate mapping name (first at line 11)`},
		{"envoy_rls:\n  mappings:\n    - {name: m, domain: d, descriptor: [{key: k}], policies: [api]}\n    - {name: n, domain: d, descriptor: [{key: k}], policies: [api]}",
			`x.yaml:12: envoy_rls.mappings[1]: never used: mapping "m" before it matches the same descriptors`},
	}
	for _, tc := range tests {
		base := integrationsBase
		if strings.HasPrefix(tc.yaml, "# no trusted proxies") {
			base = strings.Replace(base, "real_ip: {trusted_proxies: [127.0.0.1]}", "real_ip: {}", 1)
		}
		_, err := ParseWith("x.yaml", []byte(base+tc.yaml+"\n"), LoadOptions{})
		var errs *Errors
		if !errors.As(err, &errs) {
			t.Errorf("%s: got %v, want %s", tc.yaml, err, tc.want)
			continue
		}
		if got := errs.Error(); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.yaml, got, tc.want)
		}
	}
}

// TestIntegrationsParsed: the fields land in Config, with their defaults.
func TestIntegrationsParsed(t *testing.T) {
	c, err := ParseWith("x.yaml", []byte(integrationsBase+`forward_auth: {listen: 127.0.0.1:8082, refused_status: 403}
envoy_rls:
  listen: 127.0.0.1:8081
  mappings:
    - {name: login, domain: edge, descriptor: [{key: header_match, value: login}, {key: remote_address}], policies: [api]}
`), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.ForwardAuth != (ForwardAuth{Listen: "127.0.0.1:8082", RefusedStatus: 403}) || c.EnvoyRLS.Listen != "127.0.0.1:8081" {
		t.Fatalf("%+v %+v", c.ForwardAuth, c.EnvoyRLS)
	}
	m := c.EnvoyRLS.Mappings[0]
	if m.Name != "login" || m.Domain != "edge" || len(m.Entries) != 2 || m.Entries[0] != (RLSEntry{"header_match", "login", true}) ||
		m.Entries[1] != (RLSEntry{Key: "remote_address"}) || strings.Join(m.Policies, ",") != "api" {
		t.Fatalf("%+v", m)
	}
	d, err := ParseWith("x.yaml", []byte(integrationsBase), LoadOptions{})
	if err != nil || d.ForwardAuth != (ForwardAuth{}) || d.EnvoyRLS.Listen != "" || d.EnvoyRLS.Mappings != nil {
		t.Fatalf("defaults: %+v %+v %v", d.ForwardAuth, d.EnvoyRLS, err)
	}
}

// TestDecisionServiceRefusesConcurrency: with the proxy listener off,
// forward_auth serves every route, and a concurrency policy on one is
// refused, as are count_status and cost_response_header (none of them
// can settle without the response).
func TestDecisionServiceRefusesConcurrency(t *testing.T) {
	base := strings.Replace(integrationsBase, "listen: 127.0.0.1:8080", `listen: ""`, 1)
	if _, err := ParseWith("x.yaml", []byte(base), LoadOptions{}); err != nil {
		t.Fatalf("listen: \"\" is refused: %v", err)
	}
	_, err := ParseWith("x.yaml", []byte(strings.Replace(base, "policies: [api]}", "policies: [api, pool]}", 1)+"forward_auth: {listen: 127.0.0.1:8082}\n"), LoadOptions{})
	want := `x.yaml:7: routes[0].policies: policy "pool" is a concurrency limit (its lease ends with the response), but with listen: "" this route is served only by forward_auth, which never sees the response`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	fa := "forward_auth: {listen: 127.0.0.1:8082}\n"
	counted := strings.Replace(base, "limit: 5, window: 1m}", "limit: 5, window: 1m, count_status: [401]}", 1) + fa
	_, err = ParseWith("x.yaml", []byte(counted), LoadOptions{})
	want = `x.yaml:7: routes[0].policies: policy "api" counts only some response statuses (count_status), but with listen: "" this route is served only by forward_auth, which never sees the response`
	if err == nil || err.Error() != want {
		t.Errorf("count_status: got %v\nwant %s", err, want)
	}
	costed := strings.Replace(base, "policies: [api]}", "policies: [api], cost_response_header: X-Tokens-Used}", 1) + fa
	_, err = ParseWith("x.yaml", []byte(costed), LoadOptions{})
	want = `x.yaml:7: routes[0].cost_response_header: cost_response_header needs the upstream's response, but with listen: "" this route is served only by forward_auth, which never sees the response`
	if err == nil || err.Error() != want {
		t.Errorf("cost_response_header: got %v\nwant %s", err, want)
	}
}
