package e2e

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"rlproxy/internal/testutil/nginxtest"
	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// TestConcurrencyVsNginxLimitConn: the concurrency policy (limit N, key ip)
// against nginx `limit_conn` N over `limit_conn_zone $binary_remote_addr`,
// same inputs to both: N+3 requests from one address at once, each held
// by the upstream until released. Both let exactly N reach the upstream
// and answer the other 3 at once — nginx 503 (limit_conn_status's
// default), rlproxy 429 (its refusal status, documented) — then the N
// answer 200. Over HTTP/1.1 (a connection per request) and cleartext
// HTTP/2 (all N+3 as streams of one connection: nginx counts each stream,
// as rlproxy counts each request), for N = 1 and 10.
func TestConcurrencyVsNginxLimitConn(t *testing.T) {
	src := 10
	for _, h2 := range []bool{false, true} {
		for _, n := range []int{1, 10} {
			name := fmt.Sprintf("http1/%d", n)
			listen := ""
			if h2 {
				name, listen = fmt.Sprintf("h2c/%d", n), " http2"
			}
			t.Run(name, func(t *testing.T) {
				upN, upR := clientsNewHold(t), clientsNewHold(t)
				ng := nginxtest.Start(t, fmt.Sprintf(`
    limit_conn_zone $binary_remote_addr zone=perip:1m;
    server {
        listen %s%s;
        location / { limit_conn perip %d; proxy_pass %s; }
    }`, nginxtest.Listen, listen, n, upN.URL))
				rl := rlproxytest.Start(t, fmt.Sprintf(`
server: { h2c: true }
upstreams: { app: { url: %q } }
policies: { conc: { algorithm: concurrency, limit: %d, key: ip } }
routes: [ { name: all, upstream: app, policies: [conc] } ]
`, upR.URL, n))
				for _, target := range []struct {
					name, url string
					up        *clientsHoldUpstream
					refusal   int
				}{{"nginx", ng.URL, upN, http.StatusServiceUnavailable}, {"rlproxy", rl.URL, upR, http.StatusTooManyRequests}} {
					src++
					c := limitConnClient(fmt.Sprintf("127.0.4.%d", src), h2)
					if h2 { // the streams below share this connection
						resp, _ := rlproxytest.Get(t, c, target.url+"/warm")
						if resp.ProtoMajor != 2 {
							t.Fatalf("%s: HTTP/%d, want HTTP/2", target.name, resp.ProtoMajor)
						}
					}
					ch, _ := clientsLaunch(c, target.url+"/x", n+3)
					early := clientsCollect(t, ch, 3)
					waitfor.True(t, target.name+": N in flight", func() bool { return target.up.inflight.Load() == int64(n) })
					target.up.Free()
					late := clientsCollect(t, ch, n)
					t.Logf("%s %s: %d at once: first answers %v, then %v; %d reached the upstream in flight", name, target.name, n+3, early, late, n)
					if early[target.refusal] != 3 || late[200] != n {
						t.Errorf("%s: %v then %v, want 3×%d then %d×200", target.name, early, late, target.refusal, n)
					}
				}
			})
		}
	}
}

// limitConnClient is an HTTP client from the loopback address src: one
// connection per request in flight, or (h2) cleartext HTTP/2 with prior
// knowledge over one connection.
func limitConnClient(src string, h2 bool) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}
	if h2 {
		p := new(http.Protocols)
		p.SetUnencryptedHTTP2(true)
		tr.Protocols, tr.MaxConnsPerHost = p, 1
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}
