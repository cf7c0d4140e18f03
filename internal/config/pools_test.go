package config

import (
	"strings"
	"testing"
	"time"
)

// withPoolDefaults fills u's pool fields as a one-server `url` gets them.
func withPoolDefaults(u *Upstream) *Upstream {
	u.Servers = []UpstreamServer{{URL: u.URL, Weight: 1}}
	u.Balance, u.MaxFails, u.FailTimeout, u.Retries = BalanceRoundRobin, 1, 10*time.Second, 1
	u.HashKey = defaultKey()
	return u
}

// TestPoolFields decodes every pool field and its defaults.
func TestPoolFields(t *testing.T) {
	src := `upstreams:
  app:
    urls: ["http://127.0.0.1:9001", { url: "http://127.0.0.1:9002", weight: 3 }]
    balance: client_hash
    hash_key: header:X-API-Key
    max_fails: 3
    fail_timeout: 5s
    fail_statuses: [502, 503]
    health_check: { path: /healthz, interval: 1s, fails: 3 }
    retries: 2
    retry_timeout: 2s
log:
  access: { format: combined, path: access.log }
routes: [{ name: r, upstream: app }]
`
	c, err := ParseWith("/etc/rlproxy/x.yaml", []byte(src), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := c.Upstreams["app"]
	if len(u.Servers) != 2 || u.Servers[0].Weight != 1 || u.Servers[1].Weight != 3 || u.URL != u.Servers[0].URL ||
		u.Servers[1].URL.Host != "127.0.0.1:9002" {
		t.Errorf("servers %+v", u.Servers)
	}
	if u.Balance != BalanceClientHash || u.HashKey.Sources[0].Kind != SourceHeader || u.MaxFails != 3 ||
		u.FailTimeout != 5*time.Second || len(u.FailStatuses) != 2 || u.Retries != 2 || u.RetryTimeout != 2*time.Second {
		t.Errorf("upstream %+v", u)
	}
	want := HealthCheck{Path: "/healthz", Interval: time.Second, Timeout: time.Second, Fails: 3, Passes: 2}
	if *u.HealthCheck != want {
		t.Errorf("health_check %+v, want %+v", *u.HealthCheck, want)
	}
	if a := c.Log.Access; !a.Enabled || a.Format != "combined" || a.Path != "/etc/rlproxy/access.log" || a.Buffer != 4096 {
		t.Errorf("log.access %+v", a)
	}
}

// TestPoolProblems: each mistake of a pool field is reported as
// FILE:LINE: field: message.
func TestPoolProblems(t *testing.T) {
	tests := []struct{ name, upstream, want string }{
		{"url and urls", `{ url: "http://a:1", urls: ["http://b:1"] }`, `x.yaml:2: upstreams.app.urls: set url or urls, not both`},
		{"mixed schemes", `{ urls: ["http://a:1", "https://b:1"] }`, `x.yaml:2: upstreams.app.urls[1]: "https://b:1": all servers of a pool must be http://`},
		{"mixed paths", `{ urls: ["http://a:1/x", "http://b:1/y"] }`, `x.yaml:2: upstreams.app.urls[1]: "http://b:1/y": all servers of a pool must have the path "/x"`},
		{"twice", `{ urls: ["http://a:1", "http://a:1"] }`, `x.yaml:2: upstreams.app.urls[1]: "a:1": listed twice (first at line 2)`},
		{"empty", `{ urls: [] }`, `x.yaml:2: upstreams.app.urls: want 1 to 64 servers, not 0`},
		{"bad weight", `{ urls: [{ url: "http://a:1", weight: 0 }] }`, `x.yaml:2: upstreams.app.urls[0].weight: 0: want a whole number from 1 to 1000`},
		{"no url", `{ urls: [{ weight: 2 }] }`, `x.yaml:2: upstreams.app.urls[0].url: required: an http:// or https:// URL`},
		{"bad url", `{ urls: ["ftp://a:1"] }`, `x.yaml:2: upstreams.app.urls[0]: "ftp://a:1": want an http:// or https:// URL`},
		{"balance", `{ url: "http://a:1", balance: random }`, `x.yaml:2: upstreams.app.balance: "random": want round_robin, least_conn or client_hash`},
		{"hash_key without client_hash", `{ url: "http://a:1", hash_key: ip }`, `x.yaml:2: upstreams.app.hash_key: applies to balance: client_hash only`},
		{"hash_key", `{ url: "http://a:1", balance: client_hash, hash_key: "head:X" }`, `x.yaml:2: upstreams.app.hash_key: "head:X": unknown key source; want ip, global, header:NAME, query:NAME, cookie:NAME, jwt:CLAIM or tls:FIELD`},
		{"max_fails", `{ url: "http://a:1", max_fails: -1 }`, `x.yaml:2: upstreams.app.max_fails: -1: want a whole number from 0 to 1000`},
		{"fail_timeout", `{ url: "http://a:1", fail_timeout: 0s }`, `x.yaml:2: upstreams.app.fail_timeout: "0s": must be greater than 0`},
		{"fail_statuses", `{ url: "http://a:1", fail_statuses: [200] }`, `x.yaml:2: upstreams.app.fail_statuses[0]: 200: want a whole number from 500 to 599`},
		{"retries", `{ url: "http://a:1", retries: 64 }`, `x.yaml:2: upstreams.app.retries: 64: want a whole number from 0 to 63`},
		{"retry_timeout", `{ url: "http://a:1", retry_timeout: -1s }`, `x.yaml:2: upstreams.app.retry_timeout: "-1s": must not be negative`},
		{"health_check path", `{ url: "http://a:1", health_check: { path: health } }`, `x.yaml:2: upstreams.app.health_check.path: "health": must start with /`},
		{"health_check timeout", `{ url: "http://a:1", health_check: { interval: 1s, timeout: 2s } }`, `x.yaml:2: upstreams.app.health_check.timeout: 2s: must not exceed interval (1s)`},
		{"health_check fails", `{ url: "http://a:1", health_check: { fails: 0 } }`, `x.yaml:2: upstreams.app.health_check.fails: 0: want a whole number from 1 to 100`},
		{"health_check interval", `{ url: "http://a:1", health_check: { interval: 0s } }`, `x.yaml:2: upstreams.app.health_check.interval: "0s": must be greater than 0`},
		{"health_check expect_status", `{ url: "http://a:1", health_check: { expect_status: 99 } }`, `x.yaml:2: upstreams.app.health_check.expect_status: 99: want a whole number from 100 to 599`},
		{"health_check passes", `{ url: "http://a:1", health_check: { passes: 101 } }`, `x.yaml:2: upstreams.app.health_check.passes: 101: want a whole number from 1 to 100`},
		{"fail_statuses twice", `{ url: "http://a:1", fail_statuses: [502, 502] }`, `x.yaml:2: upstreams.app.fail_statuses[1]: 502: listed twice`},
		{"urls and builtin", `{ builtin: echo, urls: ["http://a:1"] }`, `x.yaml:2: upstreams.app.urls: applies to url or urls, not builtin`},
		{"health_check unknown", `{ url: "http://a:1", health_check: { uri: / } }`, `x.yaml:2: upstreams.app.health_check.uri: unknown field "uri"`},
		{"builtin", `{ builtin: echo, retries: 2 }`, `x.yaml:2: upstreams.app.retries: applies to url or urls, not builtin`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWith("x.yaml", []byte("upstreams:\n  app: "+tt.upstream+"\nroutes: [{ name: r, upstream: app }]\n"), LoadOptions{})
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error:\n%v\nwant:\n%s", err, tt.want)
			}
		})
	}
}

// TestReservedProblems: the route name "-" and bad log.access fields.
func TestReservedProblems(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"route -", "upstreams: { app: { builtin: echo } }\nroutes: [{ name: \"-\", upstream: app }]\n", `x.yaml:2: routes[0].name: "-": reserved (the metrics' route label of requests that match no route)`},
		{"access format", "log: { access: { format: xml } }\nupstreams: { app: { builtin: echo } }\nroutes: [{ name: r, upstream: app }]\n", `x.yaml:1: log.access.format: "xml": want json or combined`},
		{"access enabled", "log: { access: { enabled: yes } }\nupstreams: { app: { builtin: echo } }\nroutes: [{ name: r, upstream: app }]\n", `x.yaml:1: log.access.enabled: "yes": want true or false`},
		{"access buffer", "log: { access: { buffer: 1 } }\nupstreams: { app: { builtin: echo } }\nroutes: [{ name: r, upstream: app }]\n", `x.yaml:1: log.access.buffer: 1: want a whole number from 16 to 1048576`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWith("x.yaml", []byte(tt.src), LoadOptions{})
			if err == nil || err.Error() != tt.want {
				t.Errorf("error:\n%v\nwant:\n%s", err, tt.want)
			}
		})
	}
}
