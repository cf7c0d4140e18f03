package config

import (
	"strings"
	"testing"
)

// TestUpstreamFieldMistakes: each wrong forwarding field of an upstream is
// reported with file, line and field path; a set_env secret's value never
// appears in a report.
func TestUpstreamFieldMistakes(t *testing.T) {
	t.Setenv("RLPROXY_TEST_API_KEY", "s3cr3t-value")
	tests := []struct{ name, up, want string }{
		{"unknown protocol", `{ url: "http://a:1", protocol: http3 }`, `x.yaml:2: upstreams.app.protocol: "http3": want http1 or h2c`},
		{"h2c over https", `{ url: "https://a:1", protocol: h2c }`, `x.yaml:2: upstreams.app.protocol: h2c is cleartext HTTP/2 for an http:// url; an https:// upstream negotiates h2 by ALPN`},
		{"host with scheme", `{ url: "http://a:1", host: "https://b.example" }`, `x.yaml:2: upstreams.app.host: "https://b.example": want client, upstream or a host name (host[:port], no scheme or path)`},
		{"host with path", `{ url: "http://a:1", host: "b.example/x" }`, `x.yaml:2: upstreams.app.host: "b.example/x": want client, upstream or a host name (host[:port], no scheme or path)`},
		{"tls_server_name on http", `{ url: "http://a:1", tls_server_name: b.example }`, `x.yaml:2: upstreams.app.tls_server_name: needs an https:// url`},
		{"tls_server_name with port", `{ url: "https://a:1", tls_server_name: "b.example:443" }`, `x.yaml:2: upstreams.app.tls_server_name: "b.example:443": want a host name (no scheme, port or path)`},
		{"set_env unset", `{ url: "http://a:1", request_headers: { set_env: { X-Api-Key: RLPROXY_TEST_UNSET_VAR } } }`, `x.yaml:2: upstreams.app.request_headers.set_env.X-Api-Key: environment variable RLPROXY_TEST_UNSET_VAR is not set`},
		{"bad header name", `{ url: "http://a:1", response_headers: { set: { "X Bad": v } } }`, `x.yaml:2: upstreams.app.response_headers.set.X Bad: "X Bad" is not a header name`},
		{"set twice", `{ url: "http://a:1", request_headers: { set: { x-api-key: a }, set_env: { X-Api-Key: RLPROXY_TEST_API_KEY } } }`, `x.yaml:2: upstreams.app.request_headers.set_env.X-Api-Key: header X-Api-Key is already set by upstreams.app.request_headers.set.x-api-key`},
		{"unknown rule", `{ url: "http://a:1", request_headers: { add: { a: b } } }`, `x.yaml:2: upstreams.app.request_headers.add: unknown field "add"`},
		{"remove bad name", `{ url: "http://a:1", request_headers: { remove: ["a:b"] } }`, `x.yaml:2: upstreams.app.request_headers.remove[0]: "a:b" is not a header name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "upstreams:\n  app: " + tt.up + "\nroutes: [{ name: r, upstream: app }]\n"
			_, err := ParseWith("x.yaml", []byte(src), LoadOptions{})
			if err == nil {
				t.Fatalf("no error, want %s", tt.want)
			}
			got := err.Error()
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
			if strings.Contains(got, "s3cr3t") {
				t.Errorf("the secret's value is in the report: %s", got)
			}
		})
	}
}

// TestUpstreamFields decodes every forwarding field to exact values, and
// the defaults when none is set.
func TestUpstreamFields(t *testing.T) {
	t.Setenv("RLPROXY_TEST_API_KEY", "s3cr3t-value")
	c, err := ParseWith("x.yaml", []byte(`
upstreams:
  plain: { url: "http://a:1" }
  app:
    url: "https://a.internal:8443/api/"
    host: upstream
    tls_server_name: backend.internal
    request_headers:
      set: { x-env: prod }
      set_env: { X-Api-Key: RLPROXY_TEST_API_KEY }
      remove: [cookie]
    response_headers: { set: { X-Served-By: rlproxy }, remove: [server, x-powered-by] }
  grpc: { url: "http://g:50051", protocol: h2c, host: "grpc.example:443" }
routes: [{ name: r, upstream: app }]
`), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, a, g := c.Upstreams["plain"], c.Upstreams["app"], c.Upstreams["grpc"]
	if p.Host != "" || p.Protocol != "" || p.TLSServerName != "" || !p.RequestHeaders.Empty() || !p.ResponseHeaders.Empty() {
		t.Errorf("defaults: %+v", p)
	}
	if a.Host != HostUpstream || a.TLSServerName != "backend.internal" {
		t.Errorf("app: host %q tls_server_name %q", a.Host, a.TLSServerName)
	}
	want := []HeaderValue{{Name: "X-Env", Value: "prod"}, {Name: "X-Api-Key", Value: "s3cr3t-value", Secret: true}}
	if got := a.RequestHeaders.Set; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("request_headers.set %+v, want %+v", got, want)
	}
	if r := a.RequestHeaders.Remove; len(r) != 1 || r[0] != "Cookie" {
		t.Errorf("request_headers.remove %q", r)
	}
	if r := a.ResponseHeaders; len(r.Set) != 1 || r.Set[0].Name != "X-Served-By" || strings.Join(r.Remove, ",") != "Server,X-Powered-By" {
		t.Errorf("response_headers %+v", r)
	}
	if s := a.RequestHeaders.Set[1].String(); strings.Contains(s, "s3cr3t") {
		t.Errorf("a secret header prints as %q", s)
	}
	if g.Protocol != ProtocolH2C || g.Host != "grpc.example:443" {
		t.Errorf("grpc: protocol %q host %q", g.Protocol, g.Host)
	}
}
