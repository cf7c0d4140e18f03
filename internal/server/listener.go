package server

import (
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/pires/go-proxyproto"

	"rlproxy/internal/config"
	"rlproxy/internal/framing"
)

// publicProtocols is what the public listener speaks: HTTP/1.1 always;
// HTTP/2 over TLS (negotiated by ALPN); cleartext HTTP/2 with prior
// knowledge (RFC 9113 §3.3) next to HTTP/1.1 on a plain listener when
// server.h2c is set. Go's http.Protocols tells the two apart by the
// connection preface.
func publicProtocols(cfg *config.Config) *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	if cfg.TLS != nil {
		p.SetHTTP2(true)
	} else if cfg.Server.H2C {
		p.SetUnencryptedHTTP2(true)
	}
	return p
}

// proxyHeaderTimeout bounds reading a PROXY header from a trusted peer.
const proxyHeaderTimeout = 5 * time.Second

// withProxyProtocol wraps ln so that connections from pp's trusted peers
// carry the client address of their PROXY protocol header (v1 or v2) as
// RemoteAddr, which real_ip then starts from; a trusted peer's connection
// without a header is closed unless pp.Required is false. A connection
// from any other peer that starts with a PROXY header is closed without
// the header being read (go-proxyproto's REJECT); one without is served
// with its TCP peer as the client. nil pp leaves ln as it is.
func withProxyProtocol(ln net.Listener, pp *config.ProxyProtocol) net.Listener {
	if pp == nil {
		return ln
	}
	trusted := proxyproto.USE
	if pp.Required {
		trusted = proxyproto.REQUIRE
	}
	return &proxyproto.Listener{
		Listener:          ln,
		ReadHeaderTimeout: proxyHeaderTimeout,
		ConnPolicy: func(o proxyproto.ConnPolicyOptions) (proxyproto.Policy, error) {
			if isTrusted(o.Upstream, pp.Trusted) {
				return trusted, nil
			}
			return proxyproto.REJECT, nil
		},
	}
}

// isTrusted reports whether addr's IP is in one of the prefixes.
func isTrusted(addr net.Addr, trusted []netip.Prefix) bool {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	for _, p := range trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// withFraming guards a plain listener's connections against ambiguous
// request framing (package framing: Content-Length with Transfer-Encoding,
// HTTP/1.0 with Transfer-Encoding and obs-fold get 400, as nginx). A TLS
// listener is left as it is: net/http negotiates HTTP/2 only on a
// *tls.Conn, so its connections cannot be wrapped; there the proxy's
// close-after rule keeps a leftover byte from being read as a request.
func withFraming(ln net.Listener, cfg *config.Config) net.Listener {
	if cfg.TLS != nil {
		return ln
	}
	return &framing.Listener{Listener: ln}
}
