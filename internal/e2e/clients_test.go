package e2e

// "Who is the client", end to end through a real rlproxy: key
// sources, real-IP hardening, plans, the quota endpoint, concurrency
// leases, request cost and exempt clients. Limits use token buckets with a
// refill of one per hour (no window boundary can move a count mid-test)
// unless the feature itself is about windows.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/testutil/fakeclock"
	"rlproxy/internal/testutil/redisserver"
	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// clientsKeys lists every key of srv with SCAN (never KEYS).
func clientsKeys(t *testing.T, srv *redisserver.Server) []string {
	t.Helper()
	var keys []string
	cursor := "0"
	for range 1000 {
		e, err := srv.Do(t, "SCAN", cursor, "COUNT", "1000").AsScanEntry()
		if err != nil {
			t.Fatalf("SCAN: %v", err)
		}
		keys = append(keys, e.Elements...)
		if cursor = strconv.FormatUint(e.Cursor, 10); cursor == "0" {
			return keys
		}
	}
	t.Fatal("SCAN did not finish")
	return nil
}

// clientsStatus sends GET url through c with header pairs and returns the status.
func clientsStatus(t *testing.T, c *http.Client, url string, hdr ...string) int {
	t.Helper()
	resp, _ := rlproxytest.Get(t, c, url, hdr...)
	return resp.StatusCode
}

// clientsSeq sends n GETs and returns their statuses, e.g. "[200 200 429]".
func clientsSeq(t *testing.T, c *http.Client, url string, n int, hdr ...string) string {
	t.Helper()
	codes := make([]int, n)
	for i := range codes {
		codes[i] = clientsStatus(t, c, url, hdr...)
	}
	return fmt.Sprint(codes)
}

// clientsExpect fails unless the statuses of the steps are want.
func clientsExpect(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s: statuses %s, want %s", what, got, want)
	}
}

// clientsJWT signs claims (a JSON object) as an HS256 JWT with secret.
func clientsJWT(secret []byte, claims string) string {
	enc := base64.RawURLEncoding
	signed := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(claims))
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(signed))
	return signed + "." + enc.EncodeToString(mac.Sum(nil))
}

// clientsTamper replaces the payload of token with claims, keeping the
// original signature (what an attacker claiming another sub would send).
func clientsTamper(token, claims string) string {
	parts := strings.Split(token, ".")
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(claims))
	return strings.Join(parts, ".")
}

// clientsRawCredentials are credential values the key-source test sends;
// none may ever appear verbatim in a store key.
var clientsRawCredentials = []string{"rawkey-alpha-7731", "rawkey-beta-9904", "qkey-gamma-1187",
	"cookie-delta-5521", "cookie-eps-3310", "tenant-zeta-6642", "alice-sub-4471", "bob-sub-2290"}

// TestClientKeySources runs every key source through the proxy: separate
// budgets per credential, the ip fallback for missing, empty and blank
// credentials (per client, never one shared keyless bucket), global, lists,
// combined tuples, a 64 KB key, IPv6 /64 and IPv4 /24 grouping, IPv4-mapped
// addresses, multi-line X-Forwarded-For and Forwarded. On Valkey it also
// checks the key names: fixed size, credentials hashed, never verbatim.
func TestClientKeySources(t *testing.T) {
	for _, st := range e2eStores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			storeY, srv := e2eStore(t, st)
			up := rlproxytest.NewUpstream(t)
			var pols, routes strings.Builder
			for _, p := range []struct{ name, burst, key string }{
				{"hdr", "2", "header:X-API-Key"},
				{"qry", "2", "query:api_key"},
				{"cke", "2", "cookie:session"},
				{"jwt", "2", "jwt:sub"},
				{"glob", "2", "global"},
				{"list", "2", "[header:X-API-Key, ip]"},
				{"tuple", "2", "[header:X-Tenant, ip], combine: true"},
				{"big", "2", "header:X-API-Key"},
				{"v6", "5", "ip, ipv6_prefix: 64"},
				{"v4", "2", "ip, ipv4_prefix: 24"},
				{"mapped", "1", "ip"},
				{"mline", "2", "ip"},
			} {
				fmt.Fprintf(&pols, "  %s: { algorithm: token_bucket, rate: 1r/h, burst: %s, key: %s }\n", p.name, p.burst, p.key)
				fmt.Fprintf(&routes, "  - { name: %s, match: { path_prefix: /%s/ }, upstream: app, policies: [%s] }\n", p.name, p.name, p.name)
			}
			in := rlproxytest.Start(t, storeY+fmt.Sprintf(`
server: { max_header_bytes: 262144 }
real_ip: { header: X-Forwarded-For, trusted_proxies: [127.0.0.1, 10.0.0.0/8], recursive: true }
upstreams: { app: { url: %q } }
policies:
%sroutes:
%s`, up.URL, pols.String(), routes.String()))
			c2, c3, c4 := rlproxytest.ClientFrom("127.0.0.2"), rlproxytest.ClientFrom("127.0.0.3"), rlproxytest.ClientFrom("127.0.0.4")
			proxy1 := rlproxytest.ClientFrom("127.0.0.1") // the trusted proxy
			u := in.URL

			// header: two keys, two budgets; keyless clients fall back to their own ip.
			clientsExpect(t, "hdr key A", clientsSeq(t, c2, u+"/hdr/x", 3, "X-API-Key", "rawkey-alpha-7731"), "[200 200 429]")
			clientsExpect(t, "hdr key B", clientsSeq(t, c2, u+"/hdr/x", 3, "X-API-Key", "rawkey-beta-9904"), "[200 200 429]")
			clientsExpect(t, "hdr keyless .2: missing, missing, empty, blank", fmt.Sprint([]int{
				clientsStatus(t, c2, u+"/hdr/x"), clientsStatus(t, c2, u+"/hdr/x"),
				clientsStatus(t, c2, u+"/hdr/x", "X-API-Key", ""), clientsStatus(t, c2, u+"/hdr/x", "X-API-Key", " \t "),
			}), "[200 200 429 429]")
			clientsExpect(t, "hdr keyless .3 (own budget)", fmt.Sprint([]int{
				clientsStatus(t, c3, u+"/hdr/x", "X-API-Key", "   "), clientsStatus(t, c3, u+"/hdr/x"), clientsStatus(t, c3, u+"/hdr/x"),
			}), "[200 200 429]")

			// query: %-escapes are unescaped (the same key), an empty value is the ip.
			clientsExpect(t, "query A", fmt.Sprint([]int{
				clientsStatus(t, c2, u+"/qry/x?api_key=qkey-gamma-1187"),
				clientsStatus(t, c2, u+"/qry/x?a=1&api_key=qkey%2Dgamma%2D1187"),
				clientsStatus(t, c2, u+"/qry/x?api_key=qkey-gamma-1187"),
			}), "[200 200 429]")
			clientsExpect(t, "query empty → ip", clientsSeq(t, c2, u+"/qry/x?api_key=", 3), "[200 200 429]")
			clientsExpect(t, "query other key", clientsSeq(t, c2, u+"/qry/x?api_key=other", 1), "[200]")

			// cookie: quotes stripped; another cookie, another budget.
			clientsExpect(t, "cookie S1", fmt.Sprint([]int{
				clientsStatus(t, c2, u+"/cke/x", "Cookie", "session=cookie-delta-5521"),
				clientsStatus(t, c2, u+"/cke/x", "Cookie", `theme=dark; session="cookie-delta-5521"`),
				clientsStatus(t, c3, u+"/cke/x", "Cookie", "session=cookie-delta-5521"),
			}), "[200 200 429]")
			clientsExpect(t, "cookie S2", clientsSeq(t, c2, u+"/cke/x", 1, "Cookie", "session=cookie-eps-3310"), "[200]")

			// jwt:sub unverified: the claim is the key, whatever signs it.
			alice := clientsJWT([]byte("some-secret-nobody-checks-here!!"), `{"sub":"alice-sub-4471"}`)
			forged := clientsJWT([]byte("another-secret-entirely-xxxxxxxx"), `{"sub":"alice-sub-4471"}`)
			bob := clientsJWT([]byte("x"), `{"sub":"bob-sub-2290"}`)
			clientsExpect(t, "jwt alice", fmt.Sprint([]int{
				clientsStatus(t, c2, u+"/jwt/x", "Authorization", "Bearer "+alice),
				clientsStatus(t, c3, u+"/jwt/x", "Authorization", "Bearer "+forged),
				clientsStatus(t, c4, u+"/jwt/x", "Authorization", "bearer "+alice),
			}), "[200 200 429]")
			clientsExpect(t, "jwt bob", clientsSeq(t, c2, u+"/jwt/x", 1, "Authorization", "Bearer "+bob), "[200]")
			clientsExpect(t, "jwt garbage → ip", clientsSeq(t, c2, u+"/jwt/x", 3, "Authorization", "Bearer not.a-jwt"), "[200 200 429]")

			// global: one budget for everybody.
			clientsExpect(t, "global", fmt.Sprint([]int{
				clientsStatus(t, c2, u+"/glob/x"), clientsStatus(t, c3, u+"/glob/x", "X-API-Key", "k"), clientsStatus(t, c4, u+"/glob/x"),
			}), "[200 200 429]")

			// list [header, ip]: the key wins, else the ip.
			clientsExpect(t, "list key A", clientsSeq(t, c2, u+"/list/x", 3, "X-API-Key", "rawkey-alpha-7731"), "[200 200 429]")
			clientsExpect(t, "list .2 keyless", clientsSeq(t, c2, u+"/list/x", 3), "[200 200 429]")
			clientsExpect(t, "list .3 keyless", clientsSeq(t, c3, u+"/list/x", 1), "[200]")

			// combine: the (tenant, ip) tuple.
			clientsExpect(t, "tuple T1@.2", clientsSeq(t, c2, u+"/tuple/x", 3, "X-Tenant", "tenant-zeta-6642"), "[200 200 429]")
			clientsExpect(t, "tuple T1@.3", clientsSeq(t, c3, u+"/tuple/x", 1, "X-Tenant", "tenant-zeta-6642"), "[200]")
			clientsExpect(t, "tuple T2@.2", clientsSeq(t, c2, u+"/tuple/x", 1, "X-Tenant", "t2"), "[200]")
			clientsExpect(t, "tuple none@.2", clientsSeq(t, c2, u+"/tuple/x", 1), "[200]")

			// A 64 KB credential: served, and one fixed-size key.
			huge := strings.Repeat("K", 64<<10)
			clientsExpect(t, "64 KB key", clientsSeq(t, c2, u+"/big/x", 3, "X-API-Key", huge), "[200 200 429]")
			clientsExpect(t, "64 KB key + 1 byte", clientsSeq(t, c2, u+"/big/x", 1, "X-API-Key", huge+"K"), "[200]")

			// IPv6 rotation inside one /64 from behind the trusted proxy.
			var v6 []int
			for i := 1; i <= 10; i++ {
				v6 = append(v6, clientsStatus(t, proxy1, u+"/v6/x", "X-Forwarded-For", fmt.Sprintf("2001:db8:1:2::%x", i*0x1111)))
			}
			passed := strings.Count(fmt.Sprint(v6), "200")
			if passed != 5 {
				t.Errorf("10 addresses of one /64 with limit 5: %d passed (%v), want 5", passed, v6)
			}
			clientsExpect(t, "v6 other /64", clientsSeq(t, proxy1, u+"/v6/x", 1, "X-Forwarded-For", "2001:db8:1:3::1"), "[200]")

			// IPv4 /24 grouping.
			clientsExpect(t, "v4 one /24", fmt.Sprint([]int{
				clientsStatus(t, proxy1, u+"/v4/x", "X-Forwarded-For", "198.51.100.1"),
				clientsStatus(t, proxy1, u+"/v4/x", "X-Forwarded-For", "198.51.100.200"),
				clientsStatus(t, proxy1, u+"/v4/x", "X-Forwarded-For", "198.51.100.77"),
			}), "[200 200 429]")
			clientsExpect(t, "v4 next /24", clientsSeq(t, proxy1, u+"/v4/x", 1, "X-Forwarded-For", "198.51.101.1"), "[200]")

			// IPv4-mapped and plain spellings are one client.
			clientsExpect(t, "mapped", fmt.Sprint([]int{
				clientsStatus(t, proxy1, u+"/mapped/x", "X-Forwarded-For", "::ffff:1.2.3.4"),
				clientsStatus(t, proxy1, u+"/mapped/x", "X-Forwarded-For", "1.2.3.4"),
			}), "[200 429]")

			// Two X-Forwarded-For lines are one list, walked last line first:
			// the client is 203.0.113.9 (10.0.0.1 is a trusted hop).
			clientsExpect(t, "multi-line XFF", fmt.Sprint([]int{
				clientsStatus(t, proxy1, u+"/mline/x", "X-Forwarded-For", "203.0.113.9", "X-Forwarded-For", "10.0.0.1"),
				clientsStatus(t, proxy1, u+"/mline/x", "X-Forwarded-For", "203.0.113.9"),
				clientsStatus(t, proxy1, u+"/mline/x", "X-Forwarded-For", "203.0.113.9, 10.0.0.1"),
				clientsStatus(t, proxy1, u+"/mline/x", "X-Forwarded-For", "10.0.0.1"),
			}), "[200 200 429 200]")
			// An untrusted peer's header is ignored: its own address is the key.
			clientsExpect(t, "spoofed XFF from .3", fmt.Sprint([]int{
				clientsStatus(t, c3, u+"/mapped/x", "X-Forwarded-For", "9.9.9.1"),
				clientsStatus(t, c3, u+"/mapped/x", "X-Forwarded-For", "9.9.9.2"),
			}), "[200 429]")

			if srv == nil {
				return
			}
			keys := clientsKeys(t, srv)
			keyRE := regexp.MustCompile(`^rl:v2:\{(ip:[0-9a-f.:/]+|h:[0-9a-f]{32}|t:[0-9a-f]{32}|global)\}:[a-z0-9]+:tb$`)
			for _, k := range keys {
				if !keyRE.MatchString(k) || len(k) > 80 {
					t.Errorf("store key %q (%d bytes): want the fixed forms of DESIGN.md, ≤ 80 bytes", k, len(k))
				}
				for _, raw := range append(clientsRawCredentials, "KKKKKKKK", "other") {
					if strings.Contains(k, raw) {
						t.Errorf("store key %q holds the raw credential %q", k, raw)
					}
				}
			}
			want := []string{"rl:v2:{ip:2001:db8:1:2::/64}:v6:tb", "rl:v2:{ip:198.51.100.0/24}:v4:tb",
				"rl:v2:{ip:1.2.3.4}:mapped:tb", "rl:v2:{ip:203.0.113.9}:mline:tb", "rl:v2:{ip:10.0.0.1}:mline:tb",
				"rl:v2:{global}:glob:tb", "rl:v2:{ip:127.0.0.2}:hdr:tb", "rl:v2:{ip:127.0.0.3}:hdr:tb"}
			have := map[string]bool{}
			hashedBig := 0
			for _, k := range keys {
				have[k] = true
				if strings.HasSuffix(k, ":big:tb") && strings.HasPrefix(k, "rl:v2:{h:") {
					hashedBig++
				}
			}
			for _, k := range want {
				if !have[k] {
					t.Errorf("store key %q missing; have %v", k, keys)
				}
			}
			if hashedBig != 2 {
				t.Errorf("64 KB keys: %d hashed keys for policy big, want 2", hashedBig)
			}
		})
	}
}

// TestClientForwardedHeader reads the client from RFC 7239 Forwarded when
// real_ip.header says so: the port is not part of the client, and
// X-Forwarded-For is then ignored.
func TestClientForwardedHeader(t *testing.T) {
	t.Parallel()
	storeY, srv := e2eStore(t, "valkey")
	up := rlproxytest.NewUpstream(t)
	in := rlproxytest.Start(t, storeY+fmt.Sprintf(`
real_ip: { header: Forwarded, trusted_proxies: [127.0.0.1] }
upstreams: { app: { url: %q } }
policies:
  fwd: { algorithm: token_bucket, rate: 1r/h, burst: 1 }
routes:
  - { name: fwd, match: { path_prefix: / }, upstream: app, policies: [fwd] }
`, up.URL))
	p := rlproxytest.ClientFrom("127.0.0.1")
	clientsExpect(t, "Forwarded", fmt.Sprint([]int{
		clientsStatus(t, p, in.URL+"/a", "Forwarded", `for="[2001:db8::1]:443"`),
		clientsStatus(t, p, in.URL+"/a", "Forwarded", `For="[2001:DB8:0::1]:8443";proto=https`),
		clientsStatus(t, p, in.URL+"/a", "Forwarded", `for="[2001:db8::2]:443"`),
		clientsStatus(t, p, in.URL+"/a", "X-Forwarded-For", "192.0.2.1"),
		clientsStatus(t, p, in.URL+"/a", "X-Forwarded-For", "192.0.2.2"),
	}), "[200 429 200 200 429]")
	have := strings.Join(clientsKeys(t, srv), " ")
	for _, k := range []string{"rl:v2:{ip:2001:db8::1}:fwd:tb", "rl:v2:{ip:2001:db8::2}:fwd:tb", "rl:v2:{ip:127.0.0.1}:fwd:tb"} {
		if !strings.Contains(have, k) {
			t.Errorf("store key %q missing; have %s", k, have)
		}
	}
}

// TestClientJWTVerified: with jwt.hmac_secret_env set, a token whose
// signature does not verify (tampered claim, alg none) is absent, so the
// client is keyed by its ip; a valid token is keyed by its sub.
func TestClientJWTVerified(t *testing.T) {
	t.Parallel()
	const env = "RLPROXY_E2E_CLIENTS_JWT_SECRET"
	secret := []byte("clients-e2e-hs256-secret-0123456789abcdef")
	os.Setenv(env, string(secret)) // unique name: safe beside parallel tests
	t.Cleanup(func() { os.Unsetenv(env) })
	up := rlproxytest.NewUpstream(t)
	in := rlproxytest.Start(t, fmt.Sprintf(`
jwt: { hmac_secret_env: %s }
upstreams: { app: { url: %q } }
policies:
  jwt: { algorithm: token_bucket, rate: 1r/h, burst: 2, key: jwt:sub }
routes:
  - { name: jwt, match: { path_prefix: / }, upstream: app, policies: [jwt] }
`, env, up.URL))
	c2, c3 := rlproxytest.ClientFrom("127.0.0.2"), rlproxytest.ClientFrom("127.0.0.3")
	alice := clientsJWT(secret, `{"sub":"alice"}`)
	tampered := clientsTamper(alice, `{"sub":"mallory"}`)
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"alice"}`)) + "."
	expired := clientsJWT(secret, `{"sub":"alice","exp":1000}`)
	clientsExpect(t, "valid alice from .2 and .3", fmt.Sprint([]int{
		clientsStatus(t, c2, in.URL+"/x", "Authorization", "Bearer "+alice),
		clientsStatus(t, c3, in.URL+"/x", "Authorization", "Bearer "+alice),
		clientsStatus(t, c3, in.URL+"/x", "Authorization", "Bearer "+alice),
	}), "[200 200 429]")
	// .2's ip budget: tampered, alg none, expired and no token all share it.
	clientsExpect(t, "invalid tokens from .2 → ip", fmt.Sprint([]int{
		clientsStatus(t, c2, in.URL+"/x", "Authorization", "Bearer "+tampered),
		clientsStatus(t, c2, in.URL+"/x", "Authorization", "Bearer "+none),
		clientsStatus(t, c2, in.URL+"/x", "Authorization", "Bearer "+expired),
		clientsStatus(t, c2, in.URL+"/x"),
	}), "[200 200 429 429]")
	clientsExpect(t, "tampered from .3 → .3's ip", clientsSeq(t, c3, in.URL+"/x", 3, "Authorization", "Bearer "+tampered), "[200 200 429]")
}

// clientsHeaders returns resp's RateLimit-Policy and RateLimit headers.
func clientsHeaders(resp *http.Response) (string, string) {
	return resp.Header.Get("RateLimit-Policy"), resp.Header.Get("RateLimit")
}

// TestClientPlans: a free key gets exactly its hourly quota, a pro key is
// unaffected, unknown keys share the default plan per client ip (inventing
// keys buys nothing), and headers list one member per plan policy.
func TestClientPlans(t *testing.T) {
	for _, st := range e2eStores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			in, _ := e2eStart(t, st, `
quota_endpoint: { path: /rate-limit }
upstreams: { app: { url: %q } }
policies:
  free_hourly: { algorithm: fixed_window, limit: 100, window: 1h }
  free_daily:  { algorithm: fixed_window, limit: 1000, window: 24h }
  pro_hourly:  { algorithm: fixed_window, limit: 10000, window: 1h }
  pro_daily:   { algorithm: fixed_window, limit: 100000, window: 24h }
plans:
  tiers:
    key: header:X-API-Key
    keys: { "k-free-1": free, "k-pro-1": pro }
    default: free
    plans:
      free: [free_hourly, free_daily]
      pro:  [pro_hourly, pro_daily]
routes:
  - { name: api, match: { path_prefix: /api/ }, upstream: app, plan: tiers }
`)
			e2eAwayFromBoundary(t, time.Hour, 30*time.Second)
			c2 := rlproxytest.ClientFrom("127.0.0.2")
			ok := 0
			var last *http.Response
			for range 101 {
				resp, _ := rlproxytest.Get(t, c2, in.URL+"/api/x", "X-API-Key", "k-free-1")
				if resp.StatusCode == 200 {
					ok++
				}
				last = resp
			}
			if ok != 100 || last.StatusCode != 429 {
				t.Fatalf("free key: %d of 101 passed, last %d; want 100 and 429", ok, last.StatusCode)
			}
			pol, rl := clientsHeaders(last)
			if pol != `"free_hourly";q=100;w=3600, "free_daily";q=1000;w=86400` {
				t.Errorf("free RateLimit-Policy = %q", pol)
			}
			if !regexp.MustCompile(`^"free_hourly";r=0;t=\d+, "free_daily";r=900;t=\d+$`).MatchString(rl) {
				t.Errorf("free RateLimit = %q, want hourly r=0 and daily r=900", rl)
			}
			resp, body := rlproxytest.Get(t, c2, in.URL+"/rate-limit", "X-API-Key", "k-free-1")
			var q clientsQuota
			if err := json.Unmarshal([]byte(body), &q); err != nil || resp.StatusCode != 200 || q.Limit != 100 || q.Remaining != 0 ||
				fmt.Sprint(q.Policies) != "[{free_hourly 0} {free_daily 900}]" {
				t.Errorf("quota endpoint for the free key: %d %s, want limit 100 remaining 0, free_hourly 0, free_daily 900", resp.StatusCode, body)
			}
			ok = 0
			for range 101 {
				resp, _ := rlproxytest.Get(t, c2, in.URL+"/api/x", "X-API-Key", "k-pro-1")
				if resp.StatusCode == 200 {
					ok++
				}
				last = resp
			}
			if ok != 101 {
				t.Errorf("pro key after the free one: %d of 101 passed, want 101", ok)
			}
			pol, rl = clientsHeaders(last)
			if pol != `"pro_hourly";q=10000;w=3600, "pro_daily";q=100000;w=86400` ||
				!regexp.MustCompile(`^"pro_hourly";r=9899;t=\d+, "pro_daily";r=99899;t=\d+$`).MatchString(rl) {
				t.Errorf("pro headers = %q / %q", pol, rl)
			}

			// A bot from .3 inventing 101 keys: the default plan, keyed by its ip.
			c3 := rlproxytest.ClientFrom("127.0.0.3")
			ok = 0
			for i := range 101 {
				if clientsStatus(t, c3, in.URL+"/api/x", "X-API-Key", fmt.Sprintf("invented-%d", i)) == 200 {
					ok++
				}
			}
			if ok != 100 {
				t.Errorf("bot with 101 invented keys: %d passed, want 100 (the free quota once)", ok)
			}
			clientsExpect(t, "bot keyless", clientsSeq(t, c3, in.URL+"/api/x", 1), "[429]")
			clientsExpect(t, "another keyless client", clientsSeq(t, rlproxytest.ClientFrom("127.0.0.4"), in.URL+"/api/x", 1), "[200]")
		})
	}
}

// TestClientPlanDailyBinds: with hourly 5/1h and daily 3/24h (after a
// route policy) the daily limit refuses the 4th request; Retry-After is the daily wait (to the next
// UTC midnight) and the problem body names the daily policy.
func TestClientPlanDailyBinds(t *testing.T) {
	t.Parallel()
	up := rlproxytest.NewUpstream(t)
	in := rlproxytest.Start(t, fmt.Sprintf(`
upstreams: { app: { url: %q } }
policies:
  d_hourly: { algorithm: fixed_window, limit: 5, window: 1h }
  d_daily:  { algorithm: fixed_window, limit: 3, window: 24h }
  d_route:  { algorithm: token_bucket, rate: 1r/h, burst: 100 }
plans:
  tiers:
    key: header:X-API-Key
    keys: { "k1": free }
    default: free
    plans: { free: [d_hourly, d_daily] }
routes:
  - { name: api, match: { path_prefix: / }, upstream: app, policies: [d_route], plan: tiers }
`, up.URL))
	e2eAwayFromBoundary(t, time.Hour, 10*time.Second)
	c := rlproxytest.ClientFrom("127.0.0.2")
	clientsExpect(t, "daily 3", clientsSeq(t, c, in.URL+"/x", 3, "X-API-Key", "k1"), "[200 200 200]")
	resp, body := rlproxytest.Get(t, c, in.URL+"/x", "X-API-Key", "k1")
	if resp.StatusCode != 429 {
		t.Fatalf("4th: status %d, want 429", resp.StatusCode)
	}
	now := time.Now()
	toMidnight := int64((24*time.Hour - time.Duration(now.UnixMilli()%86_400_000)*time.Millisecond + time.Second - 1) / time.Second)
	ra, _ := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
	if ra < toMidnight-2 || ra > toMidnight+1 {
		t.Errorf("Retry-After = %d, want the daily wait ≈ %d s", ra, toMidnight)
	}
	var pb struct {
		Policy    string `json:"policy"`
		Remaining int64  `json:"remaining"`
		Limit     int64  `json:"limit"`
	}
	if err := json.Unmarshal([]byte(body), &pb); err != nil || pb.Policy != "d_daily" || pb.Limit != 3 || pb.Remaining != 0 {
		t.Errorf("problem body %s: want policy d_daily, limit 3, remaining 0", body)
	}
	pol, rl := clientsHeaders(resp)
	if pol != `"d_route";q=100;w=360000, "d_hourly";q=5;w=3600, "d_daily";q=3;w=86400` {
		t.Errorf("RateLimit-Policy = %q", pol)
	}
	if !regexp.MustCompile(`^"d_route";r=97;t=\d+, "d_hourly";r=2;t=\d+, "d_daily";r=0;t=\d+$`).MatchString(rl) {
		t.Errorf("RateLimit = %q, want hourly r=2 (not charged) and daily r=0", rl)
	}
}

// TestClientPlanKeysFile: plans from a keys_file; rewriting the file moves
// a key to another plan without restarting (the watcher reloads).
func TestClientPlanKeysFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keys := filepath.Join(dir, "plans.keys.yaml")
	seed, err := os.ReadFile("testdata/clients/plans.keys.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keys, seed, 0o644); err != nil {
		t.Fatal(err)
	}
	up := rlproxytest.NewUpstream(t)
	cfg := filepath.Join(dir, "rlproxy.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`listen: "127.0.0.1:0"
admin_listen: "127.0.0.1:0"
upstreams: { app: { url: %q } }
policies:
  kf_free: { algorithm: token_bucket, rate: 1r/h, burst: 2 }
  kf_pro:  { algorithm: token_bucket, rate: 1r/h, burst: 50 }
plans:
  tiers:
    key: header:X-API-Key
    keys_file: plans.keys.yaml
    default: free
    plans: { free: [kf_free], pro: [kf_pro] }
routes:
  - { name: api, match: { path_prefix: / }, upstream: app, plan: tiers }
`, up.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	in := rlproxytest.Start(t, "", rlproxytest.FromFile(cfg))
	c := rlproxytest.ClientFrom("127.0.0.2")
	planOf := func(key string) string {
		t.Helper()
		resp, _ := rlproxytest.Get(t, c, in.URL+"/x", "X-API-Key", key)
		pol, _ := clientsHeaders(resp)
		return pol
	}
	if p := planOf("kf-gold"); p != `"kf_pro";q=50;w=180000` {
		t.Errorf("kf-gold from the keys file: RateLimit-Policy %q, want the pro plan", p)
	}
	if p := planOf("kf-later"); p != `"kf_free";q=2;w=7200` {
		t.Errorf("kf-later (not yet listed): RateLimit-Policy %q, want the free plan", p)
	}
	if err := os.WriteFile(keys, append(seed, []byte("kf-later: pro\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, "kf-later on the pro plan after the keys file changed", func() bool { return planOf("kf-later") == `"kf_pro";q=50;w=180000` })
}

// clientsQuota is the quota endpoint's JSON answer.
type clientsQuota struct {
	Limit     int64 `json:"limit"`
	Remaining int64 `json:"remaining"`
	Policies  []struct {
		Name      string `json:"name"`
		Remaining int64  `json:"remaining"`
	} `json:"policies"`
}

// TestClientQuotaEndpoint: GET /rate-limit reports the remaining quota of
// the last response's RateLimit header, 100 calls spend nothing, and the
// endpoint itself refuses the 21st quick call of one client ip (burst 20).
func TestClientQuotaEndpoint(t *testing.T) {
	for _, st := range e2eStores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			in, _ := e2eStart(t, st, `
quota_endpoint: { path: /rate-limit, rate: 1r/m, burst: 20 }
upstreams: { app: { url: %q } }
policies:
  q_api: { algorithm: token_bucket, rate: 1r/h, burst: 10, key: [header:X-API-Key, ip] }
routes:
  - { name: api, match: { path_prefix: /api/ }, upstream: app, policies: [q_api] }
`)
			const key = "quota-key-1"
			c := rlproxytest.ClientFrom("127.0.0.2")
			var last *http.Response
			for range 3 {
				last, _ = rlproxytest.Get(t, c, in.URL+"/api/x", "X-API-Key", key)
			}
			if _, rl := clientsHeaders(last); !strings.HasPrefix(rl, `"q_api";r=7;`) {
				t.Fatalf("after 3 requests RateLimit = %q, want r=7", rl)
			}
			ask := func(c *http.Client) clientsQuota {
				t.Helper()
				resp, body := rlproxytest.Get(t, c, in.URL+"/rate-limit", "X-API-Key", key)
				var q clientsQuota
				if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &q) != nil {
					t.Fatalf("GET /rate-limit: %d %s", resp.StatusCode, body)
				}
				return q
			}
			if q := ask(c); q.Limit != 10 || q.Remaining != 7 || len(q.Policies) != 1 || q.Policies[0].Name != "q_api" || q.Policies[0].Remaining != 7 {
				t.Errorf("quota answer %+v, want limit 10, remaining 7 on q_api", q)
			}
			// 100 more calls, from 10 addresses (the endpoint's own limit is per ip).
			var askers []*http.Client
			for i := range 10 {
				askers = append(askers, rlproxytest.ClientFrom(fmt.Sprintf("127.0.1.%d", 10+i)))
			}
			for i := range 100 {
				if q := ask(askers[i%10]); q.Remaining != 7 {
					t.Fatalf("quota call %d: remaining %d, want 7", i, q.Remaining)
				}
			}
			last, _ = rlproxytest.Get(t, c, in.URL+"/api/x", "X-API-Key", key)
			if _, rl := clientsHeaders(last); last.StatusCode != 200 || !strings.HasPrefix(rl, `"q_api";r=6;`) {
				t.Errorf("after 101 quota calls, a real request: %d RateLimit %q, want 200 r=6", last.StatusCode, rl)
			}
			// The endpoint's own limit: 20 quick calls pass, then 429.
			c9 := rlproxytest.ClientFrom("127.0.0.9")
			codes := clientsSeq(t, c9, in.URL+"/rate-limit", 22)
			if want := "[" + strings.Repeat("200 ", 20) + "429 429]"; codes != want {
				t.Errorf("quota endpoint calls: %s, want %s", codes, want)
			}
			resp, _ := rlproxytest.Get(t, c9, in.URL+"/rate-limit")
			if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "60" {
				t.Errorf("quota endpoint over its limit: %d Retry-After %q, want 429 and 60", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
		})
	}
}

// clientsHoldUpstream is an upstream whose requests carrying X-Hold block
// until Free is called or the request is cancelled; it counts requests in
// flight and served.
type clientsHoldUpstream struct {
	*rlproxytest.Upstream
	inflight atomic.Int64
	mu       sync.Mutex
	hold     chan struct{}
}

func clientsNewHold(t *testing.T) *clientsHoldUpstream {
	h := &clientsHoldUpstream{Upstream: rlproxytest.NewUpstream(t), hold: make(chan struct{})}
	h.Handler = func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			h.mu.Lock()
			ch := h.hold
			h.mu.Unlock()
			h.inflight.Add(1)
			defer h.inflight.Add(-1)
			select {
			case <-ch:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = io.WriteString(w, "ok")
	}
	t.Cleanup(h.Free)
	return h
}

// Free lets every held request finish; later ones are held again.
func (h *clientsHoldUpstream) Free() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.hold)
	h.hold = make(chan struct{})
}

// clientsLaunch starts n held GETs at once and returns a channel of their statuses
// (0 = transport error, e.g. cancelled) and their cancel funcs.
func clientsLaunch(c *http.Client, url string, n int) (<-chan int, []context.CancelFunc) {
	out := make(chan int, n)
	cancels := make([]context.CancelFunc, n)
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			req.Header.Set("X-Hold", "1")
			resp, err := c.Do(req)
			if err != nil {
				out <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			out <- resp.StatusCode
		}()
	}
	return out, cancels
}

// clientsCollect reads n statuses from ch (waitfor.Timeout bound: a loaded
// machine answers late, a lost answer never) and counts them.
func clientsCollect(t *testing.T, ch <-chan int, n int) map[int]int {
	t.Helper()
	got := map[int]int{}
	for range n {
		select {
		case s := <-ch:
			got[s]++
		case <-time.After(waitfor.Timeout):
			t.Fatalf("timed out; statuses so far %v", got)
		}
	}
	return got
}

// TestClientConcurrency: limit 3 in flight. 10 simultaneous requests → 3
// proxied, 7 refused; once they finish, 3 more pass; a client that goes
// away frees its slot; a request held past its lease keeps its slot
// because the lease is renewed.
func TestClientConcurrency(t *testing.T) {
	for _, st := range e2eStores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			up := clientsNewHold(t)
			in := e2eStartBehind(t, st, up.URL, `
quota_endpoint: { path: /rate-limit }
upstreams: { app: { url: %q } }
policies:
  conc:  { algorithm: concurrency, limit: 3 }
  short: { algorithm: concurrency, limit: 3, lease: 300ms }
routes:
  - { name: conc,  match: { path_prefix: /conc/ },  upstream: app, policies: [conc] }
  - { name: short, match: { path_prefix: /short/ }, upstream: app, policies: [short] }
`)
			c := rlproxytest.ClientFrom("127.0.0.2")
			url := in.URL + "/conc/x"

			ch, _ := clientsLaunch(c, url, 10)
			refused := clientsCollect(t, ch, 7)
			waitfor.True(t, "3 in flight", func() bool { return up.inflight.Load() == 3 })
			if refused[429] != 7 {
				t.Errorf("10 simultaneous: the 7 early answers are %v, want 7×429", refused)
			}
			up.Free()
			if got := clientsCollect(t, ch, 3); got[200] != 3 {
				t.Errorf("the 3 proxied: %v, want 3×200", got)
			}

			// After they finished: 3 more pass (a 4th is refused).
			ch, cancels := clientsLaunch(c, url, 4)
			if got := clientsCollect(t, ch, 1); got[429] != 1 {
				t.Errorf("4 more: first answer %v, want 429", got)
			}
			waitfor.True(t, "3 in flight again", func() bool { return up.inflight.Load() == 3 })
			if n := up.Count(); n != 6 {
				t.Errorf("upstream saw %d requests, want 6", n)
			}
			// A client going away frees its slot: cancel all three.
			for _, cancel := range cancels {
				cancel()
			}
			if got := clientsCollect(t, ch, 3); got[0] != 3 {
				t.Errorf("cancelled clients: %v, want 3 transport errors", got)
			}
			waitfor.True(t, "the cancelled requests to leave the upstream", func() bool { return up.inflight.Load() == 0 })
			// Release runs just after the upstream call returns; a lease
			// that leaked would hold its slot for the default lease (30 s),
			// longer than this wait.
			waitfor.Within(t, 10*time.Second, "the left clients' slots released", func() bool { return clientsQuotaOf(t, c, in.URL)["conc"] == 3 })
			ch, _ = clientsLaunch(c, url, 4)
			if got := clientsCollect(t, ch, 1); got[429] != 1 {
				t.Errorf("4 after the clients left: first answer %v, want 429 (3 slots free, not 4)", got)
			}
			waitfor.True(t, "3 slots after the clients left", func() bool { return up.inflight.Load() == 3 })
			up.Free()
			if got := clientsCollect(t, ch, 3); got[200] != 3 {
				t.Errorf("after the clients left: %v, want 3×200", got)
			}

			// Lease renewal: 300 ms leases, requests held until Free. Real
			// time, not injected: renewals run on a real ticker against
			// lease expiry. Three leases after the requests arrived, only
			// renewals can hold the slots: the check has no boundary near
			// (a later check is only a stronger one).
			surl := in.URL + "/short/x"
			ch, _ = clientsLaunch(c, surl, 3)
			waitfor.True(t, "3 long requests in flight", func() bool { return up.inflight.Load() == 3 })
			time.Sleep(900 * time.Millisecond)
			if s := clientsStatus(t, c, surl); s != 429 {
				t.Errorf("a 4th 900 ms after the 3 arrived (leases 300 ms, renewed): status %d, want 429", s)
			}
			up.Free()
			if got := clientsCollect(t, ch, 3); got[200] != 3 {
				t.Errorf("the 3 long requests: %v, want 3×200", got)
			}
			waitfor.True(t, "a slot after the long requests", func() bool { return clientsStatus(t, c, surl) == 200 })
		})
	}
}

// TestClientCostAndExempt: cost 5 on a bucket of 10 admits 2 requests; an
// exempt client passes 50 times uncounted and gets no headers for the
// exempt policy, and other clients' budgets are untouched.
func TestClientCostAndExempt(t *testing.T) {
	for _, st := range e2eStores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			in, _ := e2eStart(t, st, `
upstreams: { app: { url: %q } }
policies:
  costly: { algorithm: token_bucket, rate: 1r/h, burst: 10 }
  ex:     { algorithm: token_bucket, rate: 1r/h, burst: 3, key: global, exempt: [127.0.0.5/32] }
  plain:  { algorithm: token_bucket, rate: 1r/h, burst: 100 }
routes:
  - { name: costly, match: { path_prefix: /cost/ }, upstream: app, policies: [costly], cost: 5 }
  - { name: ex, match: { path_prefix: /ex/ }, upstream: app, policies: [ex] }
  - { name: both, match: { path_prefix: /both/ }, upstream: app, policies: [ex, plain] }
`)
			c2 := rlproxytest.ClientFrom("127.0.0.2")
			var rls []string
			var codes []int
			for range 3 {
				resp, _ := rlproxytest.Get(t, c2, in.URL+"/cost/x")
				codes = append(codes, resp.StatusCode)
				_, rl := clientsHeaders(resp)
				rls = append(rls, strings.Split(rl, ";t=")[0])
			}
			if fmt.Sprint(codes) != "[200 200 429]" || fmt.Sprint(rls) != `["costly";r=5 "costly";r=0 "costly";r=0]` {
				t.Errorf("cost 5 on burst 10: %v %v, want [200 200 429] with r=5, r=0, r=0", codes, rls)
			}

			c5 := rlproxytest.ClientFrom("127.0.0.5")
			for i := range 50 {
				resp, _ := rlproxytest.Get(t, c5, in.URL+"/ex/x")
				if resp.StatusCode != 200 || resp.Header.Get("RateLimit") != "" || resp.Header.Get("RateLimit-Policy") != "" {
					t.Fatalf("exempt request %d: %d RateLimit %q, want 200 and no headers", i, resp.StatusCode, resp.Header.Get("RateLimit"))
				}
			}
			resp, _ := rlproxytest.Get(t, c5, in.URL+"/both/x")
			if pol, rl := clientsHeaders(resp); resp.StatusCode != 200 || pol != `"plain";q=100;w=360000` || !strings.HasPrefix(rl, `"plain";r=99;`) {
				t.Errorf("exempt client on [ex, plain]: %d %q %q, want only plain's headers", resp.StatusCode, pol, rl)
			}
			// The global budget of ex is whole for everybody else.
			resp, _ = rlproxytest.Get(t, c2, in.URL+"/ex/x")
			if _, rl := clientsHeaders(resp); !strings.HasPrefix(rl, `"ex";r=2;`) {
				t.Errorf("first counted request after 51 exempt ones: RateLimit %q, want r=2", rl)
			}
			clientsExpect(t, "others on ex", clientsSeq(t, rlproxytest.ClientFrom("127.0.0.6"), in.URL+"/ex/x", 3), "[200 200 429]")
		})
	}
}

// TestClientConcurrencyNoLeak: every request that took a concurrency lease
// gives it back, also when it never reaches the upstream after the
// decision (refused for waiting longer than server.max_wait, or the client
// leaving during its leaky-bucket wait), and when the concurrency policy is
// a dry run. The quota endpoint reports the slots in use.
func TestClientConcurrencyNoLeak(t *testing.T) {
	for _, st := range e2eStores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			up := clientsNewHold(t)
			// Injected time: the leaky bucket drains by an Advance, not a
			// sleep; the waits themselves still run on real timers.
			clk := fakeclock.New(time.Now())
			in := rlproxytest.Start(t, storeYAML(t, st)+fmt.Sprintf(`
server: { max_wait: 1500ms }
quota_endpoint: { path: /rate-limit }
upstreams: { app: { url: %q } }
policies:
  nl_shape: { algorithm: leaky_bucket, rate: 1r/s, burst: 5 }
  nl_conc:  { algorithm: concurrency, limit: 2 }
  nl_dry:   { algorithm: concurrency, limit: 2, dry_run: true }
routes:
  - { name: shaped, match: { path_prefix: /shaped/ }, upstream: app, policies: [nl_shape, nl_conc] }
  - { name: dry, match: { path_prefix: /dry/ }, upstream: app, policies: [nl_dry] }
`, up.URL), rlproxytest.WithNow(clk.Now))
			c := rlproxytest.ClientFrom("127.0.0.2")
			rl := func(resp *http.Response) string { _, v := clientsHeaders(resp); return v }

			// Dry run: sequential requests each find every slot free.
			for i := range 4 {
				resp, _ := rlproxytest.Get(t, c, in.URL+"/dry/x")
				if got := rl(resp); resp.StatusCode != 200 || got != `"nl_dry";r=1;t=30` {
					t.Errorf("dry-run concurrency, sequential request %d: %d RateLimit %q, want 200 r=1 (its lease released)", i, resp.StatusCode, got)
				}
			}

			// Shaped route: 1st passes at once; 2nd waits ~1 s (client leaves
			// after 200 ms); 3rd would wait ~2 s > max_wait: refused after charging.
			if s := clientsStatus(t, c, in.URL+"/shaped/x"); s != 200 {
				t.Fatalf("shaped 1st: %d", s)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, in.URL+"/shaped/x", nil)
			if resp, err := c.Do(req); err == nil {
				resp.Body.Close()
				t.Errorf("shaped 2nd: answered %d within 200 ms, want a ~1 s wait", resp.StatusCode)
			}
			cancel()
			resp, body := rlproxytest.Get(t, c, in.URL+"/shaped/x")
			if resp.StatusCode != 429 || !strings.Contains(body, "shaping-queue-full") {
				t.Fatalf("shaped 3rd: %d %s, want 429 shaping-queue-full", resp.StatusCode, body)
			}
			// The abandoned request's handler returns on its own time; a
			// leaked lease would hold its slot for the default lease (30 s),
			// longer than this wait.
			var q map[string]int64
			if !waitfor.Poll(10*time.Second, func() bool { q = clientsQuotaOf(t, c, in.URL); return q["nl_conc"] == 2 }) {
				t.Errorf("quota endpoint after the abandoned and the refused requests: nl_conc remaining %d, want 2 (no lease leaked); %v", q["nl_conc"], q)
			}
			// Hold one real request: the endpoint reports one slot in use.
			clk.Advance(3 * time.Second) // the leaky bucket drains enough for no wait
			ch, _ := clientsLaunch(c, in.URL+"/shaped/x", 1)
			waitfor.True(t, "a held request", func() bool { return up.inflight.Load() == 1 })
			if q := clientsQuotaOf(t, c, in.URL); q["nl_conc"] != 1 {
				t.Errorf("quota endpoint with one request in flight: nl_conc remaining %d, want 1; %v", q["nl_conc"], q)
			}
			up.Free()
			clientsCollect(t, ch, 1)
		})
	}
}

// clientsQuotaOf asks the quota endpoint and returns remaining per policy.
func clientsQuotaOf(t *testing.T, c *http.Client, base string) map[string]int64 {
	t.Helper()
	resp, body := rlproxytest.Get(t, c, base+"/rate-limit")
	var q clientsQuota
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &q) != nil {
		t.Fatalf("GET /rate-limit: %d %s", resp.StatusCode, body)
	}
	m := map[string]int64{}
	for _, p := range q.Policies {
		m[p.Name] = p.Remaining
	}
	return m
}

// TestClientHugeHeaderRefused: a credential larger than
// server.max_header_bytes is refused by the HTTP server (431) before any
// limiter work, and the upstream never sees it.
func TestClientHugeHeaderRefused(t *testing.T) {
	t.Parallel()
	up := rlproxytest.NewUpstream(t)
	in := rlproxytest.Start(t, fmt.Sprintf(`
server: { max_header_bytes: 4096 }
upstreams: { app: { url: %q } }
policies:
  hh: { algorithm: token_bucket, rate: 1r/h, burst: 2, key: header:X-API-Key }
routes:
  - { name: hh, match: { path_prefix: / }, upstream: app, policies: [hh] }
`, up.URL))
	c := rlproxytest.ClientFrom("127.0.0.2")
	if s := clientsStatus(t, c, in.URL+"/x", "X-API-Key", strings.Repeat("K", 64<<10)); s != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("64 KB header over max_header_bytes 4096: status %d, want 431", s)
	}
	clientsExpect(t, "normal key afterwards", clientsSeq(t, c, in.URL+"/x", 3, "X-API-Key", "small"), "[200 200 429]")
	if n := up.Count(); n != 2 {
		t.Errorf("upstream saw %d requests, want 2", n)
	}
}
