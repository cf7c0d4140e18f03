package admin

import (
	"fmt"
	"testing"

	"rlproxy/internal/config"
)

// TestDescribeRoutes: each route and policy in the words the page shows.
func TestDescribeRoutes(t *testing.T) {
	t.Setenv("RLPROXY_TEST_DESCRIBE_SECRET", "0123456789abcdef0123")
	cfg, err := config.ParseWith("d.yaml", []byte(`
upstreams: { app: { builtin: echo } }
store: { type: memory, key_hash_secret_env: RLPROXY_TEST_DESCRIBE_SECRET }
policies:
  login: { algorithm: leaky_bucket, rate: 10r/s, burst: 20, nodelay: true, key: ip, on_store_error: deny }
  api: { algorithm: token_bucket, rate: 100r/m, burst: 5, key: [header:X-API-Key, ip], fallback: { rate: 1r/s, burst: 2 }, dry_run: true }
  both: { algorithm: sliding_window, limit: 1000, window: 1h, key: [header:X-Tenant, ip], combine: true, exempt: [10.0.0.0/8] }
routes:
  - { name: login, upstream: app, policies: [login], match: { path: /login, methods: [POST] } }
  - { name: api, upstream: app, policies: [api, both], cost: 2, match: { path_prefix: /api, host: api.example } }
  - { name: rest, upstream: app }
`), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%+v", describeRoutes(cfg))
	want := "[{Name:login Match:POST, path /login Upstream:app Cost:1 Policies:[{Name:login Limit:leaky bucket 10 r/s (burst 20, nodelay) Key:ip Fail:fail closed Notes:}] Plan:} " +
		"{Name:api Match:host api.example, prefix /api Upstream:app Cost:2 Policies:[{Name:api Limit:token bucket 100 r/m (burst 5) Key:header:X-Api-Key, ip Fail:fail open to token bucket 1 r/s (burst 2) Notes:dry run} " +
		"{Name:both Limit:sliding counter 1000 per 1h Key:header:X-Tenant + ip Fail:fail open Notes:1 exempt prefixes}] Plan:} " +
		"{Name:rest Match:every request Upstream:app Cost:1 Policies:[] Plan:}]"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
