package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"rlproxy/internal/testutil/rlproxytest"
)

// TestPerClientCapVsHAProxy: server.max_connections_per_client N against
// HAProxy 2.6's `tcp-request connection reject if { src_conn_cur ge N }`
// (the rule before `track-sc0 src`, so the connection being judged is not
// yet counted), same inputs to both: 25 connections opened from one
// address and held, then one GET on each, and 12 more from a second
// address. Both admit exactly N from the first address and N from the
// second, for N = 1 and 10.
func TestPerClientCapVsHAProxy(t *testing.T) {
	up := rlproxytest.NewUpstream(t)
	for i, n := range []int{1, 10} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ha := startHAProxyCap(t, n, strings.TrimPrefix(up.URL, "http://"))
			rl := rlproxytest.Start(t, fmt.Sprintf("server: { max_connections_per_client: %d }\nupstreams: { app: { url: %q } }\nroutes: [ { name: all, upstream: app } ]\n", n, up.URL))
			for j, target := range []struct{ name, addr string }{{"haproxy", ha}, {"rlproxy", rl.App.Addr()}} {
				// Fresh source addresses per run: the held connections of
				// one must not count against the other.
				first, second := fmt.Sprintf("127.0.3.%d", 4*i+2*j+1), fmt.Sprintf("127.0.3.%d", 4*i+2*j+2)
				a, b := capAdmitted(t, first, target.addr, 25), capAdmitted(t, second, target.addr, 12)
				t.Logf("%s, cap %d: %d of 25 connections from %s answered, %d of 12 from %s", target.name, n, a, first, b, second)
				if a != n || b != n {
					t.Errorf("%s, cap %d: %d of 25 and %d of 12 answered, want %d and %d", target.name, n, a, b, n, n)
				}
			}
		})
	}
}

// capAdmitted opens n connections from src to addr one after the other
// and holds them (until the test ends), then sends one GET on each in the
// same order; it counts the 200s.
func capAdmitted(t *testing.T, src, addr string, n int) int {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	var conns []net.Conn
	for range n {
		c, err := d.Dial("tcp", addr)
		if errors.Is(err, syscall.ECONNRESET) {
			continue // refused before connect returned
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		conns = append(conns, c)
	}
	ok := 0
	for _, c := range conns {
		if code, _ := floodGet(c); code == http.StatusOK {
			ok++
		}
	}
	return ok
}

// startHAProxyCap runs haproxy in front of upstream (HOST:PORT) with a cap
// of n connections per source address and returns its listen address.
func startHAProxyCap(t *testing.T, n int, upstream string) string {
	t.Helper()
	return runHAProxy(t, func(addr string) string {
		return fmt.Sprintf(`global
  maxconn 4000
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
frontend fe
  bind %s
  stick-table type ip size 100k store conn_cur
  tcp-request connection reject if { src_conn_cur ge %d }
  tcp-request connection track-sc0 src
  default_backend be
backend be
  server s1 %s
`, addr, n, upstream)
	})
}

// TestPerClientCapBehindProxyProtocol: behind a real HAProxy sending PROXY
// protocol v2 headers, max_connections_per_client 3 counts the client the
// header names, not HAProxy: 3 of 5 connections from one client answered,
// 3 of 3 from a second client.
func TestPerClientCapBehindProxyProtocol(t *testing.T) {
	up := rlproxytest.NewUpstream(t)
	rl := rlproxytest.Start(t, fmt.Sprintf("server: { max_connections_per_client: 3, proxy_protocol: { trusted: [127.0.0.1] } }\nupstreams: { app: { url: %q } }\nroutes: [ { name: all, upstream: app } ]\n", up.URL))
	ha := startHAProxy(t, rl.App.Addr())
	a, b := capAdmitted(t, "127.0.3.101", ha, 5), capAdmitted(t, "127.0.3.102", ha, 3)
	t.Logf("through HAProxy: %d of 5 connections from 127.0.3.101 answered, %d of 3 from 127.0.3.102", a, b)
	if a != 3 || b != 3 {
		t.Errorf("%d of 5 and %d of 3 answered, want 3 and 3", a, b)
	}
}

// TestPerClientCapReload: a reload changes max_connections_per_client for
// new connections and counts the ones already open: 2 held under a cap of
// 2, a third refused; reloaded to 3, a third admitted and a fourth
// refused; reloaded to 0 (off), a fourth admitted; and real_ip's trusted
// proxies, reloaded, are spared.
func TestPerClientCapReload(t *testing.T) {
	up := rlproxytest.NewUpstream(t)
	conf := func(cap int, trusted string) string {
		return fmt.Sprintf("server: { max_connections_per_client: %d }\nreal_ip: { trusted_proxies: [%s] }\nupstreams: { app: { url: %q } }\nroutes: [ { name: all, upstream: app } ]\n", cap, trusted, up.URL)
	}
	in := rlproxytest.Start(t, conf(2, "192.0.2.1"))
	reload := func(cap int, trusted string) {
		t.Helper()
		in.Rewrite(t, conf(cap, trusted))
		in.App.Reload("test")
		if p := in.App.Config().Server.MaxConnectionsPerClient; p == nil || *p != cap {
			t.Fatalf("reload to %d not applied", cap)
		}
	}
	addr := in.App.Addr()
	got := []int{capAdmitted(t, "127.0.3.201", addr, 3)}
	reload(3, "192.0.2.1")
	got = append(got, capAdmitted(t, "127.0.3.201", addr, 2))
	reload(0, "192.0.2.1")
	got = append(got, capAdmitted(t, "127.0.3.201", addr, 1))
	reload(1, "127.0.3.202")
	got = append(got, capAdmitted(t, "127.0.3.202", addr, 3))
	if fmt.Sprint(got) != "[2 1 1 3]" {
		t.Errorf("admitted %v, want [2 1 1 3]", got)
	}
}
