package config

import (
	"net/netip"
	"testing"
	"time"
)

// TestServerProxyFields decodes h2c, stream_idle_timeout and
// proxy_protocol, and reports each wrong value with file, line and field.
func TestServerProxyFields(t *testing.T) {
	const tail = "upstreams: { app: { builtin: echo } }\nroutes: [{ name: r, upstream: app }]\n"
	c, err := ParseWith("x.yaml", []byte("server:\n  h2c: true\n  stream_idle_timeout: 5m\n  proxy_protocol: { trusted: [10.0.0.0/8, 192.0.2.7] }\n"+tail), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := c.Server
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32")}
	if !s.H2C || s.StreamIdleTimeout != 5*time.Minute || s.ProxyProtocol == nil || !s.ProxyProtocol.Required ||
		len(s.ProxyProtocol.Trusted) != 2 || s.ProxyProtocol.Trusted[0] != want[0] || s.ProxyProtocol.Trusted[1] != want[1] {
		t.Errorf("server: %+v %+v", s, s.ProxyProtocol)
	}
	c, err = ParseWith("x.yaml", []byte("server: { proxy_protocol: { trusted: [127.0.0.1], required: false } }\n"+tail), LoadOptions{})
	if err != nil || c.Server.ProxyProtocol.Required || c.Server.H2C || c.Server.StreamIdleTimeout != 0 {
		t.Errorf("required: false: %v %+v", err, c)
	}
	for _, tt := range []struct{ src, want string }{
		{"server: { h2c: yes please }\n", `x.yaml:1: server.h2c: "yes please": want true or false`},
		{"server: { stream_idle_timeout: -1s }\n", `x.yaml:1: server.stream_idle_timeout: "-1s": must not be negative`},
		{"server:\n  proxy_protocol: { required: true }\n", `x.yaml:2: server.proxy_protocol.trusted: required: the addresses (CIDRs) of the load balancers that send PROXY headers`},
		{"server:\n  proxy_protocol: { trusted: [10.0.0.0/33] }\n", `x.yaml:2: server.proxy_protocol.trusted[0]: "10.0.0.0/33": want an IP address or CIDR such as 10.0.0.0/8 or 2001:db8::/32`},
		{"server:\n  proxy_protocol: { trusted: [10.0.0.1], reqired: true }\n", `x.yaml:2: server.proxy_protocol.reqired: unknown field "reqired"; did you mean "required"?`},
	} {
		_, err := ParseWith("x.yaml", []byte(tt.src+tail), LoadOptions{})
		if err == nil || err.Error() != tt.want {
			t.Errorf("%q:\n got  %v\n want %s", tt.src, err, tt.want)
		}
	}
}
