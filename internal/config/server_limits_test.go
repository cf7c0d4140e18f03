package config

import (
	"strconv"
	"testing"
	"time"
)

// TestServerLimits decodes write_timeout, max_connections and shutdown_delay:
// defaults when absent, 0 allowed (off, derived, close at once), and each
// mistake reported as FILE:LINE: field: message.
func TestServerLimits(t *testing.T) {
	const tail = "upstreams: { app: { builtin: echo } }\nroutes: [{ name: r, upstream: app }]\n"
	c, err := ParseWith("x.yaml", []byte(tail), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Server; s.WriteTimeout != 60*time.Second || s.ShutdownDelay != 5*time.Second || s.MaxConnections != 0 {
		t.Errorf("defaults: write_timeout %v, shutdown_delay %v, max_connections %d; want 60s, 5s, 0", s.WriteTimeout, s.ShutdownDelay, s.MaxConnections)
	}
	c, err = ParseWith("x.yaml", []byte("server:\n  write_timeout: 250ms\n  max_connections: 5000\n  shutdown_delay: 0s\n"+tail), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Server; s.WriteTimeout != 250*time.Millisecond || s.ShutdownDelay != 0 || s.MaxConnections != 5000 {
		t.Errorf("set: write_timeout %v, shutdown_delay %v, max_connections %d; want 250ms, 0s, 5000", s.WriteTimeout, s.ShutdownDelay, s.MaxConnections)
	}
	for _, tt := range []struct{ src, want string }{
		{"server:\n  write_timeout: -1s\n", `x.yaml:2: server.write_timeout: "-1s": must not be negative`},
		{"server:\n  write_timeout: soon\n", `x.yaml:2: server.write_timeout: "soon": want a duration such as 500ms, 10s, 1h`},
		{"server:\n  shutdown_delay: 1.5ms\n", `x.yaml:2: server.shutdown_delay: "1.5ms": must be a whole number of milliseconds`},
		{"server:\n  max_connections: -1\n", `x.yaml:2: server.max_connections: -1: want a whole number from 0 to 100000000`},
		{"server:\n  max_connections: many\n", `x.yaml:2: server.max_connections: "many": want a whole number`},
		{"server:\n  write_timout: 1s\n", `x.yaml:2: server.write_timout: unknown field "write_timout"; did you mean "write_timeout"?`},
	} {
		_, err := ParseWith("x.yaml", []byte(tt.src+tail), LoadOptions{})
		if err == nil || err.Error() != tt.want {
			t.Errorf("%q: got %v\nwant %s", tt.src, err, tt.want)
		}
	}
}

// TestMaxConnectionsPerClient: absent = derived (nil), 0 = off, a number
// as written; a negative or non-numeric value is reported as
// FILE:LINE: field: message.
func TestMaxConnectionsPerClient(t *testing.T) {
	const tail = "upstreams: { app: { builtin: echo } }\nroutes: [{ name: r, upstream: app }]\n"
	for src, want := range map[string]string{"": "<nil>", "server: { max_connections_per_client: 0 }\n": "0", "server:\n  max_connections_per_client: 10\n": "10"} {
		c, err := ParseWith("x.yaml", []byte(src+tail), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := "<nil>"
		if p := c.Server.MaxConnectionsPerClient; p != nil {
			got = strconv.Itoa(*p)
		}
		if got != want {
			t.Errorf("%q: max_connections_per_client %s, want %s", src, got, want)
		}
	}
	for src, want := range map[string]string{
		"server:\n  max_connections_per_client: -1\n":    `x.yaml:2: server.max_connections_per_client: -1: want a whole number from 0 to 100000000`,
		"server:\n\n  max_connections_per_client: ten\n": `x.yaml:3: server.max_connections_per_client: "ten": want a whole number`,
	} {
		_, err := ParseWith("x.yaml", []byte(src+tail), LoadOptions{})
		if err == nil || err.Error() != want {
			t.Errorf("%q: got %v\nwant %s", src, err, want)
		}
	}
}
