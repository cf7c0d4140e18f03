package config

import (
	"strings"
	"testing"
	"time"
)

// TestOverloadFields decodes adaptive_concurrency, the priority classes
// and header, a route's and a plan's priority, with defaults.
func TestOverloadFields(t *testing.T) {
	src := `server:
  priority_classes: [{ name: critical, share: 0.5 }, { name: normal, share: 0.3 }, { name: batch, share: 0 }]
  priority_header: x-priority
upstreams:
  app:
    url: http://127.0.0.1:9001
    adaptive_concurrency: { min: 2, max: 200, tolerance: 0.2, shadow: true }
  other: { url: http://127.0.0.1:9002 }
policies:
  p: { algorithm: fixed_window, limit: 10, window: 1s }
plans:
  tiers:
    key: header:X-API-Key
    plans: { free: [p], pro: [p] }
    default: free
    keys: { k1: pro }
    priority: { pro: critical, free: batch }
routes: [{ name: r, upstream: app, priority: normal, plan: tiers }]
`
	c, err := ParseWith("/etc/rlproxy/x.yaml", []byte(src), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := AdaptiveConcurrency{Min: 2, Max: 200, Initial: 10, Window: 100 * time.Millisecond, Tolerance: 0.2,
		QueueTimeout: 500 * time.Millisecond, Shadow: true}
	if a := c.Upstreams["app"].Adaptive; a == nil || *a != want {
		t.Errorf("adaptive_concurrency %+v, want %+v", a, want)
	}
	if c.Upstreams["other"].Adaptive != nil {
		t.Error("an upstream without adaptive_concurrency has one")
	}
	s := c.Server
	if len(s.PriorityClasses) != 3 || s.PriorityClasses[0] != (PriorityClass{"critical", 0.5}) || s.PriorityClasses[2] != (PriorityClass{"batch", 0}) ||
		s.PriorityHeader != "X-Priority" {
		t.Errorf("server %+v %q", s.PriorityClasses, s.PriorityHeader)
	}
	if r := c.Routes[0]; r.Priority != "normal" {
		t.Errorf("route priority %q", r.Priority)
	}
	if p := c.Plans["tiers"].Priority; p["pro"] != "critical" || p["free"] != "batch" {
		t.Errorf("plan priority %v", p)
	}
}

// TestOverloadProblems: each mistake is reported as FILE:LINE: field: message.
func TestOverloadProblems(t *testing.T) {
	base := "upstreams:\n  app:\n    url: http://127.0.0.1:9001\n"
	route := "routes: [{ name: r, upstream: app }]\n"
	tests := []struct{ name, src, want string }{
		{"min over max", base + "    adaptive_concurrency: { min: 5, max: 4 }\n" + route,
			"x.yaml:4: upstreams.app.adaptive_concurrency.min: 5: must not exceed max (4)"},
		{"initial outside", base + "    adaptive_concurrency: { max: 4, initial: 5 }\n" + route,
			"x.yaml:4: upstreams.app.adaptive_concurrency.initial: 5: must be within min (1) and max (4)"},
		{"on a route", base + "routes: [{ name: r, upstream: app, adaptive_concurrency: {} }]\n",
			"x.yaml:4: routes[0].adaptive_concurrency: adaptive_concurrency is an upstream's field"},
		{"on a policy", base + "policies:\n  p: { algorithm: fixed_window, limit: 1, window: 1s, adaptive_concurrency: {} }\n" + route,
			"x.yaml:5: policies.p.adaptive_concurrency: adaptive_concurrency is an upstream's field"},
		{"unknown class", "server: { priority_classes: [{ name: hi, share: 0.5 }] }\n" + base + "routes: [{ name: r, upstream: app, priority: high }]\n",
			`x.yaml:5: routes[0].priority: unknown priority class "high"; defined: hi`},
		{"shares over 1", "server: { priority_classes: [{ name: a, share: 0.7 }, { name: b, share: 0.4 }] }\n" + base + route,
			"x.yaml:1: server.priority_classes: the shares sum to 1.1: at most 1"},
		{"duplicate class", "server: { priority_classes: [{ name: a, share: 0.1 }, { name: a, share: 0.1 }] }\n" + base + route,
			`x.yaml:1: server.priority_classes[1].name: "a": duplicate class (first at line 1)`},
		{"share below 0", "server: { priority_classes: [{ name: a, share: -0.1 }] }\n" + base + route,
			`x.yaml:1: server.priority_classes[0].share: "-0.1": want a number from 0 to 1`},
		{"share as text", "server: { priority_classes: [{ name: a, share: half }] }\n" + base + route,
			`x.yaml:1: server.priority_classes[0].share: "half": want a number from 0 to 1`},
		{"bad header", "server: { priority_header: 'x y' }\n" + base + route,
			`x.yaml:1: server.priority_header: "x y" is not a header name`},
		{"framing header", "server: { priority_header: transfer-encoding }\n" + base + route,
			`x.yaml:1: server.priority_header: "transfer-encoding" frames or routes the request`},
		{"host header", "server: { priority_header: Host }\n" + base + route,
			`x.yaml:1: server.priority_header: "Host" frames or routes the request`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWith("/etc/rlproxy/x.yaml", []byte(tt.src), LoadOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v\nwant %s", err, tt.want)
			}
		})
	}
}

// TestPriorityShareZero: a share of 0, however written, is accepted (the
// class is guaranteed nothing), not refused as a breaker ratio would be.
func TestPriorityShareZero(t *testing.T) {
	for _, zero := range []string{"0", "0.0", "0.00", "0e0"} {
		src := "server: { priority_classes: [{ name: a, share: 0.5 }, { name: b, share: " + zero + " }] }\n" +
			"upstreams:\n  app: { url: http://127.0.0.1:9001 }\nroutes: [{ name: r, upstream: app }]\n"
		c, err := ParseWith("/etc/rlproxy/x.yaml", []byte(src), LoadOptions{})
		if err != nil {
			t.Errorf("share %s: %v", zero, err)
			continue
		}
		if got := c.Server.PriorityClasses; len(got) != 2 || got[1] != (PriorityClass{"b", 0}) {
			t.Errorf("share %s: classes %+v", zero, got)
		}
	}
}

// TestPriorityHeaderWarning: a priority header with no trusted proxy to
// believe it from is a warning naming its line; with one it is not.
func TestPriorityHeaderWarning(t *testing.T) {
	const rest = "upstreams:\n  app: { url: http://127.0.0.1:9001, adaptive_concurrency: {} }\nroutes: [{ name: r, upstream: app }]\n"
	c, err := ParseWith("/etc/rlproxy/x.yaml", []byte("server:\n  priority_header: X-Priority\n"+rest), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "/etc/rlproxy/x.yaml:2: server.priority_header: ignored: no real_ip.trusted_proxies, the only peers it is believed from (every other peer's is removed)"
	if len(c.Warnings) != 1 || c.Warnings[0].String() != want {
		t.Errorf("warnings %v, want %s", c.Warnings, want)
	}
	c, err = ParseWith("/etc/rlproxy/x.yaml", []byte("server: { priority_header: X-Priority }\nreal_ip: { trusted_proxies: [10.0.0.0/8] }\n"+rest), LoadOptions{})
	if err != nil || len(c.Warnings) != 0 {
		t.Errorf("with trusted proxies: %v, warnings %v", err, c.Warnings)
	}
}
