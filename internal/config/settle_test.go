package config

import (
	"strings"
	"testing"
)

// settleYAML is a config whose policy p has the fields in pol, on route r.
func settleYAML(pol string) string {
	return "upstreams:\n  app: { builtin: echo }\npolicies:\n  p:\n    " + pol + "\nroutes:\n  - name: r\n    upstream: app\n    policies: [p]\n"
}

// TestCountStatusMistakes: each bad count_status is reported at its
// FILE:LINE: field.
func TestCountStatusMistakes(t *testing.T) {
	const win = "algorithm: fixed_window\n    limit: 3\n    window: 1m\n    "
	for _, tt := range []struct{ name, policy, want string }{
		{"code out of range", win + "count_status: [401, 600]", `x.yaml:8: policies.p.count_status[1]: 600: want a whole number from 100 to 599`},
		{"bad class", win + `count_status: ["6xx"]`, `x.yaml:8: policies.p.count_status[0]: "6xx": want a status code from 100 to 599 or a class from "1xx" to "5xx"`},
		{"empty", win + "count_status: []", `x.yaml:8: policies.p.count_status: want at least one status, such as [401, 403] or ["5xx"]`},
		{"concurrency", "algorithm: concurrency\n    limit: 3\n    count_status: [401]", `x.yaml:7: policies.p.count_status: does not apply to algorithm concurrency (it counts requests in flight, not their outcomes)`},
		{"mapping", win + "count_status: { a: 1 }", `x.yaml:8: policies.p.count_status: want a list, not a mapping`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWith("x.yaml", []byte(settleYAML(tt.policy)), LoadOptions{})
			if err == nil || err.Error() != tt.want {
				t.Errorf("got  %v\nwant %s", err, tt.want)
			}
		})
	}
}

// TestCountStatus: codes, string codes and classes build the set; a
// policy without the field counts every status (nil).
func TestCountStatus(t *testing.T) {
	cfg, err := ParseWith("x.yaml", []byte(settleYAML("algorithm: fixed_window\n    limit: 3\n    window: 1m\n    count_status: [401, \"403\", \"5xx\"]")), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Policies["p"].CountStatus
	for code, want := range map[int]bool{401: true, 403: true, 500: true, 599: true, 200: false, 404: false, 499: false, 99: false, 600: false} {
		if s.Has(code) != want {
			t.Errorf("Has(%d) = %v, want %v", code, !want, want)
		}
	}
	cfg, err = ParseWith("x.yaml", []byte(settleYAML("algorithm: fixed_window\n    limit: 3\n    window: 1m")), LoadOptions{})
	if err != nil || cfg.Policies["p"].CountStatus != nil {
		t.Errorf("no count_status: %v %v, want nil", err, cfg.Policies["p"].CountStatus)
	}
}

// TestNeedsResponse: count_status and concurrency, also through a plan,
// need the upstream's response; a plain rate limit does not.
func TestNeedsResponse(t *testing.T) {
	cfg, err := ParseWith("x.yaml", []byte(`
upstreams: { app: { builtin: echo } }
policies:
  plain: { algorithm: token_bucket, rate: 1r/s, burst: 2 }
  fails: { algorithm: fixed_window, limit: 3, window: 1m, count_status: [401] }
  conc: { algorithm: concurrency, limit: 2 }
plans:
  tiers: { key: "header:X-Key", default: free, plans: { free: [plain], pro: [conc] }, keys: { k1: pro } }
routes:
  - { name: a, upstream: app, policies: [plain] }
  - { name: b, upstream: app, policies: [plain, fails] }
  - { name: c, upstream: app, plan: tiers }
`), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"", `policy "fails" counts only some response statuses (count_status)`, `policy "conc" is a concurrency limit (its lease ends with the response)`}
	for i, r := range cfg.Routes {
		if got := cfg.NeedsResponse(r); got != want[i] {
			t.Errorf("route %s: %q, want %q", r.Name, got, want[i])
		}
		if strings.Contains(want[i], "conc") && len(r.Policies) != 0 {
			t.Errorf("route %s: NeedsResponse changed its policies: %v", r.Name, r.Policies)
		}
	}
}

// TestCostResponseHeader: the header name is kept canonical; a name that
// is no HTTP token is reported at its FILE:LINE: field; a route with it
// needs the upstream's response.
func TestCostResponseHeader(t *testing.T) {
	src := "upstreams:\n  app: { builtin: echo }\npolicies:\n  p: { algorithm: token_bucket, rate: 1r/s, burst: 100 }\nroutes:\n  - name: r\n    upstream: app\n    policies: [p]\n    cost_response_header: %s\n"
	cfg, err := ParseWith("x.yaml", []byte(strings.Replace(src, "%s", "x-tokens-used", 1)), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Routes[0]; r.CostResponseHeader != "X-Tokens-Used" || cfg.NeedsResponse(r) != "cost_response_header needs the upstream's response" {
		t.Errorf("header %q, needs response %q", r.CostResponseHeader, cfg.NeedsResponse(r))
	}
	_, err = ParseWith("x.yaml", []byte(strings.Replace(src, "%s", `"X Tokens"`, 1)), LoadOptions{})
	want := `x.yaml:9: routes[0].cost_response_header: "X Tokens": want a header name (an HTTP token, RFC 9110 section 5.6.2), such as X-Tokens-Used`
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}
