package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/rlproxytest"
)

// e2eTool returns the path of an installed tool, or skips the test —
// fails it under RLPROXY_REQUIRE_TOOLS=1 (scripts/test.sh installs them).
func e2eTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if st, serr := os.Stat("/usr/sbin/" + name); serr == nil && !st.IsDir() {
			return "/usr/sbin/" + name
		}
		if os.Getenv("RLPROXY_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%s not installed and RLPROXY_REQUIRE_TOOLS=1", name)
		}
		t.Skipf("skipping: %s not installed", name)
	}
	return p
}

// startHAProxy runs a real HAProxy in TCP mode in front of backend,
// sending a PROXY protocol v2 header on each connection, and returns its
// address.
func startHAProxy(t *testing.T, backend string) string {
	t.Helper()
	return runHAProxy(t, func(addr string) string {
		return fmt.Sprintf(`global
    maxconn 100
defaults
    mode tcp
    timeout connect 2s
    timeout client 10s
    timeout server 10s
frontend f
    bind %s
    default_backend b
backend b
    server rl %s send-proxy-v2
`, addr, backend)
	})
}

// runHAProxy runs a real HAProxy with the configuration cfg gives for its
// listening address, stopped when t ends (its output logged if t failed),
// and returns that address once it accepts.
func runHAProxy(t *testing.T, cfg func(addr string) string) string {
	t.Helper()
	bin := e2eTool(t, "haproxy")
	addr := netutil.FreeAddr(t)
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg(addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-db", "-f", path)
	out := &netutil.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	proc, err := netutil.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.Kill()
		if t.Failed() {
			t.Logf("haproxy output:\n%s", out.String())
		}
	})
	netutil.WaitListening(t, addr, 10*time.Second)
	return addr
}

// TestProxyProtocolHAProxy: behind a real HAProxy with send-proxy-v2, the
// limit is keyed by the original client (two clients behind one HAProxy
// get a budget each) and the upstream's X-Real-IP is that client; a peer
// that is not trusted and sends a PROXY header of its own is closed
// without it setting the key, and one without a header is served as
// itself.
func TestProxyProtocolHAProxy(t *testing.T) {
	e2eAwayFromBoundary(t, time.Hour, 30*time.Second)
	up := rlproxytest.NewUpstream(t)
	up.Handler = func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.Header.Get("X-Real-Ip")) }
	in := rlproxytest.Start(t, fmt.Sprintf(`
server: { proxy_protocol: { trusted: [127.0.0.1] } }
upstreams: { app: { url: %q } }
policies: { two: { algorithm: fixed_window, limit: 2, window: 1h, key: ip } }
routes: [ { name: r, upstream: app, policies: [two] } ]
`, up.URL))
	rlAddr := strings.TrimPrefix(in.URL, "http://")
	ha := "http://" + startHAProxy(t, rlAddr)
	for _, ip := range []string{"127.0.0.5", "127.0.0.6"} {
		c := rlproxytest.ClientFrom(ip)
		var got []string
		for range 3 {
			resp, body := rlproxytest.Get(t, c, ha+"/")
			got = append(got, fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(body)))
		}
		want := fmt.Sprintf("200 %[1]s,200 %[1]s,429", ip)
		if g := strings.Join(got, ","); !strings.HasPrefix(g, want) {
			t.Errorf("client %s through HAProxy: %s, want %s…", ip, g, want)
		}
	}
	// An untrusted peer (127.0.0.7) claiming to be 127.0.0.5 in a PROXY
	// header: closed, nothing charged, nothing forwarded.
	before := up.Count()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.7")}, Timeout: 2 * time.Second}
	conn, err := d.Dial("tcp", rlAddr)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	_, _ = io.WriteString(conn, "PROXY TCP4 127.0.0.9 127.0.0.1 5555 80\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n")
	b, _ := io.ReadAll(conn)
	conn.Close()
	if len(b) != 0 || up.Count() != before {
		t.Errorf("untrusted PROXY header: answered %q, upstream +%d; want the connection closed unanswered", b, up.Count()-before)
	}
	// The same peer without a header is served as itself, with its own budget.
	resp, body := rlproxytest.Get(t, rlproxytest.ClientFrom("127.0.0.7"), in.URL+"/")
	if resp.StatusCode != 200 || body != "127.0.0.7" {
		t.Errorf("untrusted peer without a header: %d %q, want 200 127.0.0.7", resp.StatusCode, body)
	}
	// A trusted peer (127.0.0.1) without a header: required, so closed.
	if resp, err := rlproxytest.ClientFrom("127.0.0.1").Get(in.URL + "/"); err == nil {
		resp.Body.Close()
		t.Errorf("trusted peer without a PROXY header: %d, want the connection closed", resp.StatusCode)
	}
	// 127.0.0.9 (the forged address) still has its whole budget.
	resp, body = rlproxytest.Get(t, rlproxytest.ClientFrom("127.0.0.9"), ha+"/")
	if resp.StatusCode != 200 || body != "127.0.0.9" {
		t.Errorf("forged client's own budget: %d %q, want 200", resp.StatusCode, body)
	}
}
