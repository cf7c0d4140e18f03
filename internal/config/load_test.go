package config

import (
	"errors"
	"log/slog"
	"net/netip"
	"net/url"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/algo"
)

// TestProblems loads each fixture named after its mistake and checks the
// exact report: file, line, field path and message, all problems in order.
func TestProblems(t *testing.T) {
	tests := []struct {
		file string
		want string
	}{
		{"misspelled_key.yaml", `testdata/misspelled_key.yaml:8: policies.login.burts: unknown field "burts"; did you mean "burst"?`},
		{"rate_without_unit.yaml", `testdata/rate_without_unit.yaml:7: policies.api.rate: "10/s": want N r/s, N r/m, N r/h or N r/d`},
		{"token_bucket_without_burst.yaml", `testdata/token_bucket_without_burst.yaml:5: policies.api.burst: required for token_bucket: the bucket's capacity in requests, at least 1`},
		{"delay_with_nodelay.yaml", `testdata/delay_with_nodelay.yaml:10: policies.login.delay: cannot be used with nodelay: true (nodelay already serves the whole burst at once)`},
		{"zero_rate.yaml", `testdata/zero_rate.yaml:7: policies.api.rate: "0r/s": must be greater than 0`},
		{"unknown_upstream.yaml", `testdata/unknown_upstream.yaml:7: routes[0].upstream: unknown upstream "ap"; did you mean "app"?`},
		{"bad_regex.yaml", "testdata/bad_regex.yaml:6: routes[0].match.path_regex: \"^/api/(v1|v2\": error parsing regexp: missing closing ): `^/api/(v1|v2`"},
		{"field_of_other_algorithm.yaml", `testdata/field_of_other_algorithm.yaml:9: policies.hourly.rate: field "rate" does not apply to algorithm sliding_window (it takes limit, window, calendar, timezone)`},
		{"bad_cidr.yaml", `testdata/bad_cidr.yaml:4: real_ip.trusted_proxies[1]: "10.0.0.0/33": want an IP address or CIDR such as 10.0.0.0/8 or 2001:db8::/32`},
		{"cost_above_quota.yaml", `testdata/cost_above_quota.yaml:13: routes[0].cost: 6 exceeds policy "api", which accepts at most 5 requests at once: the route could never pass`},
		{"missing_password_env.yaml", `testdata/missing_password_env.yaml:6: store.valkey.password_env: environment variable RLPROXY_TEST_UNSET_PASSWORD is not set`},
		{"unreachable_key_source.yaml", `testdata/unreachable_key_source.yaml:9: policies.api.key[1]: "header:X-API-Key": never used: "ip" before it is always present`},
		{"fallback_with_deny.yaml", `testdata/fallback_with_deny.yaml:9: policies.login.fallback: applies only while failing open; this policy has on_store_error: deny`},
		{"duplicate_field.yaml", `testdata/duplicate_field.yaml:9: policies.api.rate: duplicate field "rate" (first at line 7)`},
		{"no_routes.yaml", `testdata/no_routes.yaml:2: routes: required: at least one route (a request matching no route gets 404)`},
		{"window_not_whole_ms.yaml", `testdata/window_not_whole_ms.yaml:8: policies.w.window: "1500us": must be a whole number of milliseconds`},
		{"yaml_syntax.yaml", `testdata/yaml_syntax.yaml:3: YAML syntax: did not find expected ',' or '}'`},
		// A keys_file's problems name that file and its lines; credentials
		// are never echoed.
		{"plan_unknown_policy.yaml", `testdata/plan_unknown_policy.yaml:18: plans.tiers.plans.pro[0]: unknown policy "pro_hourly"; defined: free_hourly
testdata/plan_unknown_policy.keys.yaml:3: unknown plan "gold"
testdata/plan_unknown_policy.keys.yaml:4: credential listed twice (first at testdata/plan_unknown_policy.yaml:13)`},
		// All problems at once, in line order (nginx -t stops at the first).
		{"many_mistakes.yaml", `testdata/many_mistakes.yaml:2: listen: "8080": want HOST:PORT, e.g. 127.0.0.1:8080 or :8080
testdata/many_mistakes.yaml:4: upstreams.app.url: "ftp://127.0.0.1:9000": want an http:// or https:// URL
testdata/many_mistakes.yaml:5: upstreams.demo.builtin: set url or builtin, not both
testdata/many_mistakes.yaml:9: policies.api.rate: "2000000r/s": must be at most 1000000 r/s
testdata/many_mistakes.yaml:10: policies.api.burst: -1: want a whole number from 1 to 1000000000000
testdata/many_mistakes.yaml:11: policies.api.key[2]: "cookie:session": never used: "ip" before it is always present
testdata/many_mistakes.yaml:15: policies.hourly.window: "9000h": must be at most 366 days (8784h)
testdata/many_mistakes.yaml:16: policies.hourly.key: "hedaer:X-API-Key": unknown key source; want ip, global, header:NAME, query:NAME, cookie:NAME, jwt:CLAIM or tls:FIELD; did you mean "header"?
testdata/many_mistakes.yaml:18: policies.pool.algorithm: "concurency": want leaky_bucket, token_bucket, fixed_window, sliding_log, sliding_window or concurrency; did you mean "concurrency"?
testdata/many_mistakes.yaml:22: routes[0].match.path: "api": must start with /
testdata/many_mistakes.yaml:22: routes[0].match.methods[1]: "get": listed twice
testdata/many_mistakes.yaml:24: routes[0].policies[1]: "api": listed twice
testdata/many_mistakes.yaml:24: routes[0].policies[2]: unknown policy "hourli"; did you mean "hourly"?
testdata/many_mistakes.yaml:25: routes[1].name: "api": duplicate route name (first at line 21)
testdata/many_mistakes.yaml:27: routes[1].cost: 0: want a whole number from 1 to 1000000000
testdata/many_mistakes.yaml:29: response.status: 200: want a whole number from 400 to 599
testdata/many_mistakes.yaml:30: response.headers[1]: "x-rate-limit": want ratelimit, ratelimit-legacy or x-ratelimit; did you mean "x-ratelimit"?`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c, err := LoadWith(filepath.Join("testdata", tt.file), LoadOptions{})
			if err == nil {
				t.Fatalf("Load = %+v, want errors", c)
			}
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error %T %v, want *Errors", err, err)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("errors:\n%s\nwant:\n%s", got, tt.want)
			}
			if n := strings.Count(tt.want, "\n") + 1; len(errs.Problems) != n {
				t.Errorf("%d problems, want %d", len(errs.Problems), n)
			}
		})
	}
}

// TestSmallMistakes checks one-line mistakes not worth a fixture each: the
// snippet replaces the policy body of a valid file.
func TestSmallMistakes(t *testing.T) {
	tests := []struct {
		name, policy, want string
	}{
		{"rate without r", "algorithm: leaky_bucket\n    rate: 10 rps", `policies.p.rate: "10 rps": want N r/s, N r/m, N r/h or N r/d`},
		{"fractional rate", "algorithm: leaky_bucket\n    rate: 1.5r/s", `policies.p.rate: "1.5r/s": want N r/s, N r/m, N r/h or N r/d`},
		{"negative rate", "algorithm: leaky_bucket\n    rate: -1r/s", `policies.p.rate: "-1r/s": want N r/s, N r/m, N r/h or N r/d`},
		{"rate as number", "algorithm: leaky_bucket\n    rate: 10", `policies.p.rate: "10": want N r/s, N r/m, N r/h or N r/d`},
		{"huge rate per day", "algorithm: leaky_bucket\n    rate: 86400000001r/d", `policies.p.rate: "86400000001r/d": must be at most 1000000 r/s`},
		{"rate overflow", "algorithm: leaky_bucket\n    rate: 99999999999999999999r/s", `policies.p.rate: "99999999999999999999r/s": must be at most 1000000 r/s`},
		{"burst too big", "algorithm: leaky_bucket\n    rate: 1r/s\n    burst: 1000000000001", `policies.p.burst: 1000000000001: want a whole number from 0 to 1000000000000`},
		{"burst past exact arithmetic", "algorithm: token_bucket\n    rate: 1r/d\n    burst: 20000000", `policies.p: token bucket 1 r/d (burst 20000000): burst times period exceeds 2^50 (exact arithmetic): the largest burst at this rate is 13031247`},
		{"sliding log too big", "algorithm: sliding_log\n    limit: 100001\n    window: 24h", `policies.p.limit: 100001: want a whole number from 1 to 100000`},
		{"window count too big", "algorithm: fixed_window\n    limit: 1000000000001\n    window: 24h", `policies.p.limit: 1000000000001: want a whole number from 1 to 1000000000000`},
		{"burst not a number", "algorithm: token_bucket\n    rate: 1r/s\n    burst: five", `policies.p.burst: "five": want a whole number`},
		{"delay above burst", "algorithm: leaky_bucket\n    rate: 1r/s\n    burst: 2\n    delay: 3", `policies.p.delay: 3 exceeds burst 2 (use nodelay: true to serve the whole burst at once)`},
		{"nodelay on token bucket", "algorithm: token_bucket\n    rate: 1r/s\n    burst: 2\n    nodelay: true", `policies.p.nodelay: field "nodelay" does not apply to algorithm token_bucket (it takes rate, burst)`},
		{"burst on concurrency", "algorithm: concurrency\n    limit: 5\n    burst: 2", `policies.p.burst: field "burst" does not apply to algorithm concurrency (it takes limit, lease)`},
		{"window missing", "algorithm: fixed_window\n    limit: 5", `policies.p.window: required for fixed_window: a duration such as 10s, 1h`},
		{"limit missing", "algorithm: sliding_log\n    window: 1s", `policies.p.limit: required for sliding_log: requests per window, at least 1`},
		{"zero window", "algorithm: fixed_window\n    limit: 5\n    window: 0s", `policies.p.window: "0s": must be greater than 0`},
		{"window not a duration", "algorithm: fixed_window\n    limit: 5\n    window: 1 hour", `policies.p.window: "1 hour": want a duration such as 500ms, 10s, 1h`},
		{"window rate too high", "algorithm: fixed_window\n    limit: 2000\n    window: 1ms", `policies.p.limit: 2000 per 1ms is more than 1000000 r/s`},
		{"no algorithm", "rate: 1r/s", `policies.p.algorithm: required; want leaky_bucket, token_bucket, fixed_window, sliding_log, sliding_window or concurrency`},
		{"ipv6 prefix", "algorithm: leaky_bucket\n    rate: 1r/s\n    ipv6_prefix: 129", `policies.p.ipv6_prefix: 129: want a whole number from 0 to 128`},
		{"ipv4 prefix", "algorithm: leaky_bucket\n    rate: 1r/s\n    ipv4_prefix: -1", `policies.p.ipv4_prefix: -1: want a whole number from 0 to 32`},
		{"on_store_error", "algorithm: leaky_bucket\n    rate: 1r/s\n    on_store_error: block", `policies.p.on_store_error: "block": want allow or deny`},
		{"empty header name", "algorithm: leaky_bucket\n    rate: 1r/s\n    key: \"header:\"", `policies.p.key: "header:": missing the name after header:`},
		{"bad header name", "algorithm: leaky_bucket\n    rate: 1r/s\n    key: \"header:X API\"", `policies.p.key: "header:X API": header name must be an HTTP token (RFC 9110 §5.6.2)`},
		{"source twice", "algorithm: leaky_bucket\n    rate: 1r/s\n    key: [query:k, query:k]", `policies.p.key[1]: "query:k": listed twice`},
		{"empty key list", "algorithm: leaky_bucket\n    rate: 1r/s\n    key: []", `policies.p.key: want at least one key source`},
		{"global then ip", "algorithm: leaky_bucket\n    rate: 1r/s\n    key: [global, ip]", `policies.p.key[1]: "ip": never used: "global" before it is always present`},
		{"fallback without burst", "algorithm: leaky_bucket\n    rate: 1r/s\n    fallback: { rate: 1r/s }", `policies.p.fallback.burst: required for token_bucket: the bucket's capacity in requests, at least 1`},
		{"bad exempt", "algorithm: leaky_bucket\n    rate: 1r/s\n    exempt: [localhost]", `policies.p.exempt[0]: "localhost": want an IP address or CIDR such as 10.0.0.0/8 or 2001:db8::/32`},
		{"dry_run yes", "algorithm: leaky_bucket\n    rate: 1r/s\n    dry_run: maybe", `policies.p.dry_run: "maybe": want true or false`},
		{"policy not a mapping", "[1, 2]", `policies.p: want a mapping of fields, not a list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "upstreams:\n  app: { builtin: echo }\npolicies:\n  p:\n    " + tt.policy + "\nroutes:\n  - name: r\n    upstream: app\n    policies: [p]\n"
			if strings.HasPrefix(tt.policy, "[") {
				src = strings.Replace(src, "  p:\n    [", "  p: [", 1)
			}
			_, err := ParseWith("x.yaml", []byte(src), LoadOptions{})
			if err == nil {
				t.Fatalf("no error, want %s", tt.want)
			}
			got := err.Error()
			if _, msg, _ := strings.Cut(got, ": "); msg != tt.want || strings.Contains(got, "\n") {
				t.Errorf("got  %s\nwant x.yaml:N: %s", got, tt.want)
			}
		})
	}
}

// TestOtherMistakes covers sections other than policies (whole files).
func TestOtherMistakes(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"admin on public port", "listen: :8080\nadmin_listen: 127.0.0.1:8080\n",
			`x.yaml:2: admin_listen: "127.0.0.1:8080": must not share the public listener ":8080" (metrics and health stay off the public port)`},
		{"port out of range", "listen: :80800\n", `x.yaml:1: listen: ":80800": port must be a number from 0 to 65535`},
		{"unknown top-level", "listn: :8080\n", `x.yaml:1: listn: unknown field "listn"; did you mean "listen"?`},
		{"store type", "store: { type: redis }\n", `x.yaml:1: store.type: "redis": want memory or valkey`},
		{"valkey without addrs", "store: { type: valkey }\n", `x.yaml:1: store.valkey.addrs: required with store type valkey: one address, or several seeds of a cluster`},
		{"valkey bad addr", "store:\n  type: valkey\n  valkey: { addrs: [localhost] }\n", `x.yaml:3: store.valkey.addrs[0]: "localhost": want HOST:PORT`},
		{"key prefix braces", "store:\n  valkey: { key_prefix: \"{rl}:\" }\n", `x.yaml:2: store.valkey.key_prefix: "{rl}:": must not contain { or } (the client id is the key's Cluster hash tag)`},
		{"ca_file without tls", "store:\n  valkey: { ca_file: ca.pem }\n", `x.yaml:2: store.valkey.ca_file: needs tls: true`},
		{"short hash secret", "store: { key_hash_secret_env: RLPROXY_TEST_SHORT }\n", `x.yaml:1: store.key_hash_secret_env: environment variable RLPROXY_TEST_SHORT holds 5 bytes; want at least 16`},
		{"empty hash secret", "store: { key_hash_secret_env: RLPROXY_TEST_EMPTY }\n", `x.yaml:1: store.key_hash_secret_env: environment variable RLPROXY_TEST_EMPTY is empty`},
		{"short jwt secret", "jwt: { hmac_secret_env: RLPROXY_TEST_SHORT }\n", `x.yaml:1: jwt.hmac_secret_env: environment variable RLPROXY_TEST_SHORT holds 5 bytes; want at least 32`},
		{"real_ip header", "real_ip: { header: True-Client-IP }\n", `x.yaml:1: real_ip.header: "True-Client-IP": want X-Forwarded-For, X-Real-IP or Forwarded`},
		{"log level", "log: { level: verbose }\n", `x.yaml:1: log.level: "verbose": want debug, info, warn or error`},
		{"breaker ratio above 1", "store:\n  breaker: { failure_ratio: 1.5 }\n", `x.yaml:2: store.breaker.failure_ratio: 1.5: want a number greater than 0 and at most 1`},
		{"breaker ratio zero", "store:\n  breaker: { failure_ratio: 0 }\n", `x.yaml:2: store.breaker.failure_ratio: 0: want a number greater than 0 and at most 1`},
		{"breaker ratio text", "store:\n  breaker:\n    failure_ratio: half\n", `x.yaml:3: store.breaker.failure_ratio: "half": want a number greater than 0 and at most 1`},
		{"breaker window zero", "store:\n  breaker: { window: 0s }\n", `x.yaml:2: store.breaker.window: "0s": must be greater than 0`},
		{"breaker min_calls zero", "store:\n  breaker: { min_calls: 0 }\n", `x.yaml:2: store.breaker.min_calls: 0: want a whole number from 1 to 1000000`},
		{"max_wait negative", "server: { max_wait: -1s }\n", `x.yaml:1: server.max_wait: "-1s": must not be negative`},
		{"quota path", "quota_endpoint: { path: rate-limit }\n", `x.yaml:1: quota_endpoint.path: "rate-limit": must start with /`},
		{"tls missing", "tls: { cert_file: nope.pem }\n", `x.yaml:1: tls.cert_file: "nope.pem": no such file or directory
x.yaml:1: tls.key_file: required: a PEM file`},
		{"upstream neither", "upstreams:\n  app: {}\n", `x.yaml:2: upstreams.app: want url (http:// or https://), urls or builtin: echo`},
		{"upstream no host", "upstreams:\n  app: { url: \"http:///x\" }\n", `x.yaml:2: upstreams.app.url: "http:///x": missing the host`},
		{"upstream ca_file http", "upstreams:\n  app: { url: \"http://a:1\", ca_file: ca.pem }\n", `x.yaml:2: upstreams.app.ca_file: needs an https:// url`},
		{"builtin", "upstreams:\n  app: { builtin: mirror }\n", `x.yaml:2: upstreams.app.builtin: "mirror": want echo`},
		{"duplicate upstream", "upstreams:\n  app: { builtin: echo }\n  app: { builtin: echo }\n", `x.yaml:3: upstreams.app: duplicate name "app" (first at line 2)`},
		{"route without name", "upstreams: { app: { builtin: echo } }\nroutes:\n  - upstream: app\n", `x.yaml:3: routes[0].name: required: names the route in metrics and logs`},
		{"route host with port", "upstreams: { app: { builtin: echo } }\nroutes:\n  - { name: r, upstream: app, match: { host: \"a.example:443\" } }\n", `x.yaml:3: routes[0].match.host: "a.example:443": want a host name without port (the request's port is ignored)`},
		{"cost with unknown policy", "upstreams: { app: { builtin: echo } }\nroutes:\n  - { name: r, upstream: app, policies: [nope], cost: 2 }\n", `x.yaml:3: routes[0].policies[0]: unknown policy "nope"; none is defined`},
		{"valkey empty addrs", "store: { type: valkey, valkey: { addrs: [] } }\n", `x.yaml:1: store.valkey.addrs: required with store type valkey: one address, or several seeds of a cluster`},
		{"admin_listen list", "admin_listen: [a]\n", `x.yaml:1: admin_listen: want a string, not a list`},
		{"route unknown plan", "upstreams: { app: { builtin: echo } }\nroutes:\n  - { name: r, upstream: app, plan: gold }\n", `x.yaml:3: routes[0].plan: unknown plan "gold"; none is defined`},
		{"bad method", "upstreams: { app: { builtin: echo } }\nroutes:\n  - { name: r, upstream: app, match: { methods: [\"GE T\"] } }\n", `x.yaml:3: routes[0].match.methods[0]: "GE T": want an HTTP method such as GET or POST`},
		{"routes not a list", "routes: { name: r }\n", `x.yaml:1: routes: want a list, not a mapping`},
		{"headers duplicate", "response: { headers: [ratelimit, ratelimit] }\n", `x.yaml:1: response.headers[1]: "ratelimit": listed twice`},
		{"second document", "listen: :8080\n---\nlisten: :8081\n", `x.yaml:2: a second YAML document (---) is not allowed: put everything in one`},
		{"empty file", "", `x.yaml: routes: required: at least one route (a request matching no route gets 404)`},
	}
	t.Setenv("RLPROXY_TEST_SHORT", "short")
	t.Setenv("RLPROXY_TEST_EMPTY", "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.src
			// Missing sections are appended, so the lines of tt.src stay.
			if src != "" && !strings.Contains(src, "upstreams:") {
				src += "upstreams: { app: { builtin: echo } }\n"
			}
			if src != "" && !strings.Contains(src, "routes:") {
				src += "routes: [{ name: r, upstream: app }]\n"
			}
			_, err := ParseWith("x.yaml", []byte(src), LoadOptions{})
			if err == nil {
				t.Fatalf("no error, want %s", tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// mustURL parses a URL known to be valid.
func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// checkConfig compares got with want field by field (Digest and Path aside),
// naming the first differing section.
func checkConfig(t *testing.T, got, want *Config) {
	t.Helper()
	got.Digest, got.Path = [32]byte{}, ""
	gv, wv := reflect.ValueOf(got).Elem(), reflect.ValueOf(want).Elem()
	for i := range gv.NumField() {
		name := gv.Type().Field(i).Name
		g, w := gv.Field(i).Interface(), wv.Field(i).Interface()
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s:\n got  %#v\n want %#v", name, g, w)
			switch name {
			case "Policies", "Upstreams", "Plans":
				for _, k := range gv.Field(i).MapKeys() {
					t.Logf("%s[%v]: got %+v\n want %+v", name, k, gv.Field(i).MapIndex(k), wv.Field(i).MapIndex(k))
				}
			case "Routes":
				for j := range gv.Field(i).Len() {
					t.Logf("route %d: got %+v", j, gv.Field(i).Index(j))
				}
			}
		}
	}
}

// TestSpecExample decodes docs/CONTRACT.md's example to exact values: the
// compiled algo.Limit numbers, key specs, defaults for everything unset.
func TestSpecExample(t *testing.T) {
	c, err := LoadWith("testdata/spec_example.yaml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ipKey := KeySpec{Sources: []Source{{Kind: SourceIP}}, IPv4Prefix: 32, IPv6Prefix: 128}
	want := &Config{
		Listen:      "127.0.0.1:8080",
		AdminListen: "127.0.0.1:9090",
		// Where the listeners came from, for validate.
		ListenSource: "file testdata/spec_example.yaml:1", AdminListenSource: "file testdata/spec_example.yaml:2",
		Log: Log{Level: slog.LevelInfo, Format: "text", RefusalsPerSecond: 10, Access: AccessLog{Format: "json", Buffer: 4096}},
		Server: Server{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, BodyTimeout: 60 * time.Second, MaxHeaderBytes: 1048576,
			ShutdownTimeout: 30 * time.Second, MaxWaiting: 10000, MaxWait: 30 * time.Second,
			WriteTimeout: DefaultWriteTimeout, ShutdownDelay: DefaultShutdownDelay, Engine: EngineAuto},
		Store: Store{
			Type:    "memory",
			MaxKeys: 1_000_000,
			// Parsed, but the password is read only when type is valkey.
			Valkey:     Valkey{Addrs: []string{"127.0.0.1:6379"}, Timeout: 50 * time.Millisecond, KeyPrefix: "rl:"},
			Breaker:    Breaker{Failures: 5, Cooldown: 500 * time.Millisecond, FailureRatio: 0.5, Window: 10 * time.Second, MinCalls: 20},
			HashSecret: []byte(builtinHashSecret),
		},
		RealIP: RealIP{Header: "X-Forwarded-For", Recursive: true,
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8")}},
		Response:      Response{Status: 429, Headers: HeadersRateLimit},
		QuotaEndpoint: QuotaEndpoint{Limit: algo.Limit{Kind: algo.TokenBucket, Count: 10, Period: 1000, Burst: 20}},
		Upstreams: map[string]*Upstream{
			"app":  withPoolDefaults(&Upstream{Name: "app", URL: mustURL(t, "http://127.0.0.1:9000"), ResponseHeaderTimeout: 30 * time.Second, ReadTimeout: time.Minute}),
			"demo": {Name: "demo", Builtin: "echo", ResponseHeaderTimeout: 30 * time.Second, ReadTimeout: time.Minute},
		},
		Policies: map[string]*Policy{
			"login": {Name: "login", Line: 27, Key: ipKey, OnStoreError: FailClosed,
				Limit: algo.Limit{Kind: algo.LeakyBucket, Count: 30, Period: 60_000, Burst: 5, NoDelay: true}},
			"api": {Name: "api", Line: 35,
				Limit: algo.Limit{Kind: algo.TokenBucket, Count: 10, Period: 1000, Burst: 20},
				Key:   KeySpec{Sources: []Source{{Kind: SourceHeader, Name: "X-Api-Key"}, {Kind: SourceIP}}, IPv4Prefix: 32, IPv6Prefix: 128}},
			"hourly": {Name: "hourly", Line: 41,
				Limit: algo.Limit{Kind: algo.SlidingWindow, Count: 100, Period: 3_600_000},
				Key:   KeySpec{Sources: []Source{{Kind: SourceHeader, Name: "X-Api-Key"}}, IPv4Prefix: 32, IPv6Prefix: 128}},
		},
		PolicyOrder: []string{"login", "api", "hourly"},
		Plans:       map[string]*Plans{},
		Routes: []*Route{
			{Name: "login", Match: Match{PathPrefix: "/login", Methods: []string{"POST"}}, Upstream: "app", Policies: []string{"login"}, Cost: 1, Upgrades: []string{"websocket"}},
			{Name: "api", Match: Match{PathPrefix: "/api/"}, Upstream: "app", Policies: []string{"api", "hourly"}, Cost: 1, Upgrades: []string{"websocket"}},
			{Name: "rest", Match: Match{PathPrefix: "/"}, Upstream: "app", Cost: 1, Upgrades: []string{"websocket"}},
		},
	}
	checkConfig(t, c, want)
}

// TestExtensions decodes a file that sets every extension field.
func TestExtensions(t *testing.T) {
	t.Setenv("RLPROXY_TEST_HASH_SECRET", "0123456789abcdef0123")
	t.Setenv("RLPROXY_TEST_PASSWORD", "s3cret")
	t.Setenv("RLPROXY_TEST_JWT_SECRET", strings.Repeat("j", 32))
	c, err := LoadWith("testdata/extensions.yaml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %v", c.Warnings)
	}
	jwtKey := KeySpec{Sources: []Source{{Kind: SourceJWT, Name: "sub"}, {Kind: SourceIP}}, IPv4Prefix: 24, IPv6Prefix: 64}
	want := &Config{
		Listen:       ":8443",
		ListenSource: "file testdata/extensions.yaml:2", AdminListenSource: "file testdata/extensions.yaml:3",
		Log: Log{Level: slog.LevelDebug, Format: "json", RefusalsPerSecond: 3, Access: AccessLog{Format: "json", Buffer: 4096}},
		Server: Server{ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 60 * time.Second, BodyTimeout: 15 * time.Second, MaxHeaderBytes: 65536,
			ShutdownTimeout: 15 * time.Second, MaxWaiting: 100, MaxWait: 2 * time.Second,
			WriteTimeout: DefaultWriteTimeout, ShutdownDelay: DefaultShutdownDelay, Engine: EngineAuto},
		Store: Store{
			Type:    "valkey",
			MaxKeys: 5000,
			Valkey: Valkey{Addrs: []string{"10.0.0.1:26379", "10.0.0.2:26379"}, Username: "rlproxy", Password: "s3cret",
				Timeout: 20 * time.Millisecond, KeyPrefix: "edge:", SentinelMaster: "mymaster"},
			Breaker:    Breaker{Failures: 3, Cooldown: 250 * time.Millisecond, FailureRatio: 0.25, Window: 5 * time.Second, MinCalls: 40},
			HashSecret: []byte("0123456789abcdef0123"),
		},
		RealIP:        RealIP{Header: "X-Forwarded-For"},
		JWT:           JWT{HMACSecret: []byte(strings.Repeat("j", 32))},
		Response:      Response{Status: 503, Headers: HeadersXRateLimit | HeadersRateLimitLegacy},
		QuotaEndpoint: QuotaEndpoint{Path: "/quota", Limit: algo.Limit{Kind: algo.TokenBucket, Count: 5, Period: 1000, Burst: 10}},
		Upstreams: map[string]*Upstream{
			"app": withPoolDefaults(&Upstream{Name: "app", URL: mustURL(t, "https://api.internal:8443/base"), ResponseHeaderTimeout: 5 * time.Second, ReadTimeout: time.Minute}),
		},
		Policies: map[string]*Policy{
			"sms": {Name: "sms", Line: 34, Key: jwtKey, DryRun: true,
				Limit:    algo.Limit{Kind: algo.LeakyBucket, Count: 3, Period: 1000, Burst: 9, Delay: 4},
				Fallback: &algo.Limit{Kind: algo.TokenBucket, Count: 1, Period: 1000, Burst: 2},
				Exempt: []netip.Prefix{netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("2001:db8::/32"),
					netip.MustParsePrefix("198.51.100.7/32")}},
			"pool": {Name: "pool", Line: 46, Limit: algo.Limit{Kind: algo.Concurrency, Count: 8, Period: 60_000},
				Key: KeySpec{Sources: []Source{{Kind: SourceGlobal}}, IPv4Prefix: 32, IPv6Prefix: 128}},
			"tenant": {Name: "tenant", Line: 51, Limit: algo.Limit{Kind: algo.SlidingLog, Count: 20, Period: 10_000},
				Key: KeySpec{Sources: []Source{{Kind: SourceHeader, Name: "X-Tenant"}, {Kind: SourceQuery, Name: "user"}}, Combine: true, IPv4Prefix: 32, IPv6Prefix: 128}},
			"daily": {Name: "daily", Line: 57, Limit: algo.Limit{Kind: algo.FixedWindow, Count: 1000, Period: 86_400_000},
				Key: KeySpec{Sources: []Source{{Kind: SourceCookie, Name: "session"}}, IPv4Prefix: 24, IPv6Prefix: 64}},
		},
		PolicyOrder: []string{"sms", "pool", "tenant", "daily"},
		Plans:       map[string]*Plans{},
		Routes: []*Route{
			{Name: "sms", Match: Match{Host: "api.example.com", Path: "/sms", Methods: []string{"POST", "PUT"}}, Upstream: "app", Policies: []string{"sms", "pool"}, Cost: 2, Upgrades: []string{"websocket"}},
			{Name: "tenant", Match: Match{PathRegex: regexp.MustCompile("^/t/[a-z]+$")}, Upstream: "app", Policies: []string{"tenant", "daily"}, Cost: 1, Upgrades: []string{"websocket"}},
		},
	}
	checkConfig(t, c, want)
}

// TestRateForms: every unit, with and without the space, compiles exactly.
func TestRateForms(t *testing.T) {
	tests := []struct {
		rate          string
		count, period int64
	}{
		{"10r/s", 10, 1000},
		{"10 r/s", 10, 1000},
		{"30r/m", 30, 60_000},
		{"3 r/m", 3, 60_000},
		{"100r/h", 100, 3_600_000},
		{"1000 r/d", 1000, 86_400_000},
		{"1000000r/s", 1_000_000, 1000},
	}
	for _, tt := range tests {
		src := "upstreams: { a: { builtin: echo } }\npolicies: { p: { algorithm: leaky_bucket, rate: \"" + tt.rate +
			"\" } }\nroutes: [{ name: r, upstream: a, policies: [p] }]\n"
		c, err := ParseWith("x.yaml", []byte(src), LoadOptions{})
		if err != nil {
			t.Errorf("%s: %v", tt.rate, err)
			continue
		}
		want := algo.Limit{Kind: algo.LeakyBucket, Count: tt.count, Period: tt.period}
		if got := c.Policies["p"].Limit; got != want {
			t.Errorf("%s: %+v, want %+v", tt.rate, got, want)
		}
	}
}
