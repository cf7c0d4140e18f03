package acme

import (
	"crypto/tls"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mholt/acmez/v3"

	"rlproxy/internal/config"
)

// TestConfigForClient holds the handshake configurations: a TLS-ALPN-01
// validation (acme-tls/1 alone) gets one that offers only acme-tls/1 and
// asks for no client certificate — a TLS 1.2 validator would otherwise
// fail on client_auth: require before it sees the challenge certificate —
// and any other hello the load's own configuration with acme-tls/1 added,
// built once per load.
func TestConfigForClient(t *testing.T) {
	c := &config.ACME{Domains: []string{"a.example.com"}, CA: "https://127.0.0.1:1/dir",
		Challenges: []string{config.ChallengeTLSALPN01}, Storage: filepath.Join(t.TempDir(), "acme")}
	m, err := New(c, Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Static: func() *tls.Certificate { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := &tls.Config{NextProtos: []string{"h2", "http/1.1"}, ClientAuth: tls.RequireAndVerifyClientCert}
	chal := m.ConfigForClient(&tls.ClientHelloInfo{SupportedProtos: []string{acmez.ACMETLS1Protocol}}, base)
	if chal.ClientAuth != tls.NoClientCert || !slices.Equal(chal.NextProtos, []string{acmez.ACMETLS1Protocol}) {
		t.Errorf("validation hello: client_auth %v, protocols %v; want none and [acme-tls/1]", chal.ClientAuth, chal.NextProtos)
	}
	hello := &tls.ClientHelloInfo{ServerName: "a.example.com", SupportedProtos: []string{"h2", "http/1.1"}}
	conf := m.ConfigForClient(hello, base)
	if conf.ClientAuth != tls.RequireAndVerifyClientCert || !slices.Equal(conf.NextProtos, []string{"h2", "http/1.1", acmez.ACMETLS1Protocol}) || conf.GetCertificate == nil {
		t.Errorf("other hello: client_auth %v, protocols %v", conf.ClientAuth, conf.NextProtos)
	}
	if !slices.Equal(base.NextProtos, []string{"h2", "http/1.1"}) {
		t.Errorf("base protocols changed to %v", base.NextProtos)
	}
	if m.ConfigForClient(hello, base) != conf {
		t.Error("a second handshake of the same load built its configuration again")
	}
	if next := (&tls.Config{}); m.ConfigForClient(hello, next) == conf {
		t.Error("a new load's configuration was not used")
	}
}
