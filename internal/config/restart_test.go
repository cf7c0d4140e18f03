package config

import (
	"slices"
	"testing"
)

// TestRestartOnly: the tagged fields that changed, in field order, and
// nothing for a change that reloads (a limit, tls's files).
func TestRestartOnly(t *testing.T) {
	base := func() *Config {
		return &Config{Listen: ":8080", AdminListen: "127.0.0.1:9090", Log: Log{Format: "text"}, TLS: &TLS{CertFile: "a.pem"}}
	}
	next := base()
	next.Server.MaxWaiting = 7
	next.TLS.CertFile = "b.pem"
	if got := RestartOnly(base(), next); got != nil {
		t.Fatalf("reloadable changes: RestartOnly = %q, want nil", got)
	}
	next.TLS.ACME = &ACME{Domains: []string{"a.example.com"}}
	if got := RestartOnly(base(), next); !slices.Equal(got, []string{"tls.acme"}) {
		t.Fatalf("tls.acme turned on: RestartOnly = %q, want [tls.acme]", got)
	}
	next.Listen, next.TLS, next.Log.Format = ":8081", nil, "json"
	next.ForwardAuth.Listen, next.EnvoyRLS.Listen = ":9000", ":9001"
	next.Server.ProxyProtocol = &ProxyProtocol{}
	next.Server.Engine = EngineStd
	want := []string{"listen", "tls (on or off)", "log.format", "server.proxy_protocol", "server.engine", "forward_auth.listen", "envoy_rls.listen"}
	if got := RestartOnly(base(), next); !slices.Equal(got, want) {
		t.Fatalf("RestartOnly = %q, want %q", got, want)
	}
}
