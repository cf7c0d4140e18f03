package config

import (
	"slices"
	"testing"
)

// TestRouteUpgrades: a route's upgrades default to [websocket], are kept
// lower-cased (protocol names compare case-insensitively), [] allows none,
// and a protocol that is not token[/token], h2c or a repeat is an error at
// its own line.
func TestRouteUpgrades(t *testing.T) {
	for _, c := range []struct {
		route string
		want  []string
		err   string
	}{
		{route: "{ name: r, upstream: app }", want: []string{"websocket"}},
		{route: "{ name: r, upstream: app, upgrades: [WebSocket, tcp, SPDY/3.1] }", want: []string{"websocket", "tcp", "spdy/3.1"}},
		{route: "{ name: r, upstream: app, upgrades: [] }", want: []string{}},
		{route: "{ name: r, upstream: app,\n    upgrades: [websocket,\n      \"web socket\"] }",
			err: `x.yaml:5: routes[0].upgrades[1]: "web socket": want a protocol such as websocket, tcp or SPDY/3.1 (RFC 9110 §7.8)`},
		{route: "{ name: r, upstream: app, upgrades: [spdy/] }",
			err: `x.yaml:3: routes[0].upgrades[0]: "spdy/": want a protocol such as websocket, tcp or SPDY/3.1 (RFC 9110 §7.8)`},
		{route: "{ name: r, upstream: app, upgrades: [H2C] }",
			err: `x.yaml:3: routes[0].upgrades[0]: "H2C": rlproxy never forwards an upgrade to HTTP/2 (clients reach it by HTTP/2 itself)`},
		{route: "{ name: r, upstream: app, upgrades: [tcp, TCP] }",
			err: `x.yaml:3: routes[0].upgrades[1]: "TCP": listed twice`},
		{route: "{ name: r, upstream: app, upgrades: tcp }",
			err: `x.yaml:3: routes[0].upgrades: want a list, not "tcp"`},
	} {
		src := "upstreams: { app: { builtin: echo } }\nroutes:\n  - " + c.route + "\n"
		cfg, err := ParseWith("x.yaml", []byte(src), LoadOptions{})
		switch {
		case c.err != "" && (err == nil || err.Error() != c.err):
			t.Errorf("%s: error %v, want %s", c.route, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.route, err)
		case c.err == "" && !slices.Equal(cfg.Routes[0].Upgrades, c.want):
			t.Errorf("%s: upgrades %q, want %q", c.route, cfg.Routes[0].Upgrades, c.want)
		}
	}
}
