package clientkey

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/config"
	"rlproxy/internal/reqview"
)

var (
	testSecret = []byte("store-hash-secret")
	jwtSecret  = []byte("jwt-hs256-secret")
	clientIP   = netip.MustParseAddr("192.0.2.7")
	// t0 is the injected clock of JWT tests: 2023-11-14T22:13:20Z.
	t0 = time.Unix(1_700_000_000, 0)
)

// src parses a docs/CONTRACT.md key source ("ip", "header:X-API-Key", ...).
func src(t testing.TB, s string) config.Source {
	t.Helper()
	kind, name, _ := strings.Cut(s, ":")
	kinds := map[string]config.SourceKind{
		"ip": config.SourceIP, "header": config.SourceHeader, "query": config.SourceQuery,
		"cookie": config.SourceCookie, "jwt": config.SourceJWT, "global": config.SourceGlobal, "tls": config.SourceTLS,
	}
	k, ok := kinds[kind]
	if !ok {
		t.Fatalf("bad source %q", s)
	}
	return config.Source{Kind: k, Name: name}
}

// newExtractor builds an Extractor for sources with the test secrets and
// clock t0.
func newExtractor(t testing.TB, spec config.KeySpec, verify bool, sources ...string) *Extractor {
	t.Helper()
	for _, s := range sources {
		spec.Sources = append(spec.Sources, src(t, s))
	}
	var jwt config.JWT
	if verify {
		jwt.HMACSecret = jwtSecret
	}
	e, err := New(spec, jwt, testSecret)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.now = func() time.Time { return t0 }
	return e
}

// request builds a real request's view: target, then header lines
// "Name: value".
func request(target string, headers ...string) *reqview.View {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		r.Header.Add(k, v)
	}
	return view(r)
}

// view is r's request view (reqview.Read: r's header map shared, not copied).
func view(r *http.Request) *reqview.View {
	v, _ := reqview.Read(r)
	return &v
}

func key(e *Extractor, r *reqview.View, ip netip.Addr) string {
	return string(e.Key(nil, r, ip))
}

// checkSafe fails unless id is non-empty, at most MaxLen bytes, and made of
// [0-9a-z:./] only (so never "{" or "}").
func checkSafe(t testing.TB, id string) {
	t.Helper()
	if id == "" || len(id) > MaxLen {
		t.Fatalf("id %q: length %d, want 1..%d", id, len(id), MaxLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || c == ':' || c == '.' || c == '/') {
			t.Fatalf("id %q: byte %q outside [0-9a-z:./]", id, c)
		}
	}
}

// mintJWT builds a compact JWS: header and claims JSON, signed with secret
// (HS256) or with a dummy signature when secret is nil.
func mintJWT(header, claims string, secret []byte) string {
	enc := base64.RawURLEncoding
	signed := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(claims))
	sig := []byte("not-a-signature")
	if secret != nil {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(signed))
		sig = m.Sum(nil)
	}
	return signed + "." + enc.EncodeToString(sig)
}

const hs256 = `{"alg":"HS256","typ":"JWT"}`

func TestKey(t *testing.T) {
	const ipKey = "ip:192.0.2.7"
	// Golden hashes pin the hashed-input format: changing it re-keys every
	// credential client in a running store.
	const (
		// HMAC-SHA256("store-hash-secret", "h" 0x02 "X-Api-Key" 0x00 0x01
		// uint64(3) "abc")[:16], also computed with Python's hmac module.
		hABC     = "h:0eca3ea4012e5b7a1f88d4b333a3853d"
		jwtAlice = "jwt-alice"
	)
	valid := mintJWT(hs256, `{"sub":"alice","exp":1700000100}`, jwtSecret)
	tests := []struct {
		name    string
		sources []string
		verify  bool
		r       *reqview.View
		want    string // exact id; "h:" or "t:" alone = any hash of that form
		same    string // another test's name whose id must equal this one's
	}{
		{"ip", []string{"ip"}, false, request("/"), ipKey, ""},
		{"default is ip", nil, false, request("/"), ipKey, ""},
		{"global", []string{"global"}, false, request("/"), "global", ""},
		{"header", []string{"header:X-API-Key"}, false, request("/", "X-API-Key: abc"), hABC, ""},
		{"header name case-insensitive", []string{"header:x-api-key"}, false, request("/", "X-Api-Key: abc"), hABC, ""},
		{"header first line", []string{"header:X-API-Key"}, false, request("/", "X-API-Key: abc", "X-API-Key: other"), hABC, ""},
		{"header missing", []string{"header:X-API-Key"}, false, request("/"), ipKey, ""},
		{"header empty", []string{"header:X-API-Key"}, false, request("/", "X-API-Key: "), ipKey, ""},
		{"header whitespace", []string{"header:X-API-Key"}, false, request("/", "X-API-Key: \t  "), ipKey, ""},
		{"header surrounding space trimmed", []string{"header:X-API-Key"}, false, request("/", "X-API-Key:  abc "), hABC, ""},
		{"query", []string{"query:api_key"}, false, request("/?x=1&api_key=abc"), "h:", "query escaped"},
		{"query escaped", []string{"query:api_key"}, false, request("/?api%5Fkey=%61bc"), "h:", "query"},
		{"query first wins", []string{"query:api_key"}, false, request("/?api_key=abc&api_key=zzz"), "h:", "query"},
		{"query bad escape skipped", []string{"query:api_key"}, false, request("/?api_key=%zz&api_key=abc"), "h:", "query"},
		{"query semicolon pair skipped", []string{"query:api_key"}, false, request("/?api_key=x;y"), ipKey, ""},
		{"query empty", []string{"query:api_key"}, false, request("/?api_key="), ipKey, ""},
		{"query plus is space", []string{"query:api_key"}, false, request("/?api_key=+"), ipKey, ""},
		{"cookie", []string{"cookie:session"}, false, request("/", "Cookie: a=1; session=abc; b=2"), "h:", "cookie quoted"},
		{"cookie quoted", []string{"cookie:session"}, false, request("/", "Cookie: session=\"abc\""), "h:", "cookie"},
		{"cookie second line", []string{"cookie:session"}, false, request("/", "Cookie: a=1", "Cookie: session=abc"), "h:", "cookie"},
		{"cookie prefix name no match", []string{"cookie:session"}, false, request("/", "Cookie: session2=abc; xsession=abc"), ipKey, ""},
		{"cookie empty", []string{"cookie:session"}, false, request("/", "Cookie: session="), ipKey, ""},
		{"first present wins", []string{"header:X-API-Key", "cookie:session", "ip"}, false, request("/", "Cookie: session=abc"), "h:", "cookie"},
		{"first present wins, header", []string{"header:X-API-Key", "cookie:session"}, false, request("/", "Cookie: session=zzz", "X-API-Key: abc"), hABC, ""},
		{"all absent falls back to ip", []string{"header:X-API-Key", "cookie:session"}, false, request("/"), ipKey, ""},
		{"global after absent header", []string{"header:X-API-Key", "global"}, false, request("/"), "global", ""},

		// JWT, unverified: the claim is taken on the client's word.
		{"jwt", []string{"jwt:sub"}, false, request("/", "Authorization: Bearer "+valid), "h:", jwtAlice},
		{"jwt lower-case scheme", []string{"jwt:sub"}, false, request("/", "Authorization: bearer "+valid), "h:", jwtAlice},
		{"jwt unverified accepts a forged signature", []string{"jwt:sub"}, false,
			request("/", "Authorization: Bearer "+mintJWT(`{"alg":"none"}`, `{"sub":"alice","exp":1}`, nil)), "h:", jwtAlice},
		{"jwt numeric claim", []string{"jwt:uid"}, false, request("/", "Authorization: Bearer "+mintJWT(hs256, `{"uid":42}`, nil)), "h:", ""},
		{"jwt bool claim absent", []string{"jwt:uid"}, false, request("/", "Authorization: Bearer "+mintJWT(hs256, `{"uid":true}`, nil)), ipKey, ""},
		{"jwt empty claim absent", []string{"jwt:sub"}, false, request("/", "Authorization: Bearer "+mintJWT(hs256, `{"sub":" "}`, nil)), ipKey, ""},
		{"jwt missing claim", []string{"jwt:tenant", "ip"}, false, request("/", "Authorization: Bearer "+valid), ipKey, ""},
		{"jwt basic auth", []string{"jwt:sub"}, false, request("/", "Authorization: Basic YWxpY2U6cHc="), ipKey, ""},
		{"jwt two segments", []string{"jwt:sub"}, false, request("/", "Authorization: Bearer a.b"), ipKey, ""},
		{"jwt four segments", []string{"jwt:sub"}, false, request("/", "Authorization: Bearer "+valid+".x"), ipKey, ""},
		{"jwt payload not base64", []string{"jwt:sub"}, false, request("/", "Authorization: Bearer e30.!!!.sig"), ipKey, ""},
		{"jwt payload not JSON", []string{"jwt:sub"}, false,
			request("/", "Authorization: Bearer e30."+base64.RawURLEncoding.EncodeToString([]byte("sub=alice"))+".sig"), ipKey, ""},

		// JWT, verified (HS256).
		{"jwt verified", []string{"jwt:sub"}, true, request("/", "Authorization: Bearer "+valid), "h:", jwtAlice},
		{"jwt verified, tampered payload", []string{"jwt:sub"}, true,
			request("/", "Authorization: Bearer "+tamper(valid, `{"sub":"mallory","exp":1700000100}`)), ipKey, ""},
		{"jwt verified, wrong secret", []string{"jwt:sub"}, true,
			request("/", "Authorization: Bearer "+mintJWT(hs256, `{"sub":"alice"}`, []byte("other"))), ipKey, ""},
		{"jwt verified, alg none", []string{"jwt:sub"}, true,
			request("/", "Authorization: Bearer "+mintJWT(`{"alg":"none"}`, `{"sub":"alice"}`, nil)), ipKey, ""},
		{"jwt verified, alg HS512 header", []string{"jwt:sub"}, true,
			request("/", "Authorization: Bearer "+mintJWT(`{"alg":"HS512"}`, `{"sub":"alice"}`, jwtSecret)), ipKey, ""},
		{"jwt verified, expired at exactly now", []string{"jwt:sub"}, true,
			request("/", "Authorization: Bearer "+mintJWT(hs256, `{"sub":"alice","exp":1700000000}`, jwtSecret)), ipKey, ""},
		{"jwt verified, exp one second ahead", []string{"jwt:sub"}, true,
			request("/", "Authorization: Bearer "+mintJWT(hs256, `{"sub":"alice","exp":1700000001}`, jwtSecret)), "h:", jwtAlice},
		{"jwt verified, exp not a number", []string{"jwt:sub"}, true,
			request("/", "Authorization: Bearer "+mintJWT(hs256, `{"sub":"alice","exp":"never"}`, jwtSecret)), ipKey, ""},
		{"jwt verified, nbf in the future", []string{"jwt:sub"}, true,
			request("/", "Authorization: Bearer "+mintJWT(hs256, `{"sub":"alice","nbf":1700000001}`, jwtSecret)), ipKey, ""},
		{"jwt verified, nbf now", []string{"jwt:sub"}, true,
			request("/", "Authorization: Bearer "+mintJWT(hs256, `{"sub":"alice","nbf":1700000000}`, jwtSecret)), "h:", jwtAlice},
		{"jwt verified, malformed signature", []string{"jwt:sub"}, true,
			request("/", "Authorization: Bearer "+valid[:strings.LastIndexByte(valid, '.')]+".%%%"), ipKey, ""},
	}
	got := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newExtractor(t, config.KeySpec{}, tt.verify, tt.sources...)
			id := key(e, tt.r, clientIP)
			checkSafe(t, id)
			got[tt.name] = id
			if tt.want == "h:" || tt.want == "t:" {
				if !strings.HasPrefix(id, tt.want) || len(id) != len(tt.want)+2*hashBytes {
					t.Errorf("Key = %q, want a %s hash", id, tt.want)
				}
			} else if id != tt.want {
				t.Errorf("Key = %q, want %q", id, tt.want)
			}
		})
	}
	// Equal pairs, and the named JWT subject.
	for _, tt := range tests {
		if tt.same == "" {
			continue
		}
		other, ok := got[tt.same]
		if tt.same == jwtAlice {
			other, ok = got["jwt"], true
		}
		if !ok || got[tt.name] != other {
			t.Errorf("%s: id %q, want the same as %s (%q)", tt.name, got[tt.name], tt.same, other)
		}
	}
	// Distinct pairs: same value "abc" through different sources.
	for _, pair := range [][2]string{{"header", "query"}, {"header", "cookie"}, {"query", "cookie"}, {"jwt", "header"}} {
		if got[pair[0]] == got[pair[1]] {
			t.Errorf("%s and %s: same id %q, want different clients", pair[0], pair[1], got[pair[0]])
		}
	}
}

// tamper replaces the payload of a token, keeping its header and signature.
func tamper(token, claims string) string {
	parts := strings.Split(token, ".")
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(claims))
	return strings.Join(parts, ".")
}

func TestIPKey(t *testing.T) {
	tests := []struct {
		name   string
		v4, v6 int
		ip     string
		want   string
	}{
		{"ipv4", 0, 0, "192.0.2.7", "ip:192.0.2.7"},
		{"ipv4 explicit 32", 32, 128, "192.0.2.7", "ip:192.0.2.7"},
		{"ipv4 /24", 24, 0, "192.0.2.7", "ip:192.0.2.0/24"},
		{"ipv4 /1", 1, 0, "192.0.2.7", "ip:128.0.0.0/1"},
		{"ipv4-mapped unmapped", 0, 0, "::ffff:192.0.2.7", "ip:192.0.2.7"},
		{"ipv4-mapped uses ipv4_prefix", 24, 64, "::ffff:192.0.2.7", "ip:192.0.2.0/24"},
		{"ipv6 canonical RFC 5952", 0, 0, "2001:0DB8:0000:0000:0001:0000:0000:0001", "ip:2001:db8::1:0:0:1"},
		{"ipv6 zone dropped", 0, 0, "fe80::1%eth0", "ip:fe80::1"},
		{"ipv6 /64", 0, 64, "2001:db8:1:2:aaaa:bbbb:cccc:dddd", "ip:2001:db8:1:2::/64"},
		{"ipv6 /48", 0, 48, "2001:db8:1:2::1", "ip:2001:db8:1::/48"},
		{"ipv6 prefix leaves ipv4 alone", 0, 64, "192.0.2.7", "ip:192.0.2.7"},
		{"ipv6 longest id", 0, 127, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ip:ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/127"},
		{"invalid address", 0, 0, "", "ip:invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newExtractor(t, config.KeySpec{IPv4Prefix: tt.v4, IPv6Prefix: tt.v6}, false, "ip")
			var ip netip.Addr
			if tt.ip != "" {
				ip = netip.MustParseAddr(tt.ip)
			}
			id := key(e, request("/"), ip)
			checkSafe(t, id)
			if id != tt.want {
				t.Errorf("Key(%s) = %q, want %q", tt.ip, id, tt.want)
			}
		})
	}
}

// TestIPv6Grouping: ten addresses of one /64 are one client with
// ipv6_prefix 64, ten clients without it; the next /64 is another client.
func TestIPv6Grouping(t *testing.T) {
	grouped := newExtractor(t, config.KeySpec{IPv6Prefix: 64}, false, "header:X-API-Key", "ip")
	plain := newExtractor(t, config.KeySpec{}, false, "ip")
	ids, plainIDs := map[string]bool{}, map[string]bool{}
	for i := range 10 {
		ip := netip.MustParseAddr(fmt.Sprintf("2001:db8:1:2:%x::%x", i*4099, i+1))
		ids[key(grouped, request("/"), ip)] = true
		plainIDs[key(plain, request("/"), ip)] = true
	}
	if len(ids) != 1 || !ids["ip:2001:db8:1:2::/64"] {
		t.Errorf("ipv6_prefix 64: ids %v, want only ip:2001:db8:1:2::/64", ids)
	}
	if len(plainIDs) != 10 {
		t.Errorf("ipv6_prefix 128: %d ids, want 10", len(plainIDs))
	}
	if id := key(grouped, request("/"), netip.MustParseAddr("2001:db8:1:3::1")); id != "ip:2001:db8:1:3::/64" {
		t.Errorf("next /64: %q", id)
	}
}

func TestLongCredential(t *testing.T) {
	e := newExtractor(t, config.KeySpec{}, false, "header:X-API-Key")
	long := strings.Repeat("k", 64<<10)
	a := key(e, request("/", "X-API-Key: "+long), clientIP)
	b := key(e, request("/", "X-API-Key: "+long[:len(long)-1]+"j"), clientIP)
	if len(a) != len("h:")+2*hashBytes || len(b) != len(a) {
		t.Errorf("64 KB header: ids of %d and %d bytes, want %d", len(a), len(b), len("h:")+2*hashBytes)
	}
	if a == b {
		t.Error("64 KB headers differing in the last byte: same id")
	}
}

func TestCombine(t *testing.T) {
	spec := config.KeySpec{Combine: true, IPv4Prefix: 24}
	e := newExtractor(t, spec, false, "header:X-API-Key", "ip")
	// "t" 0x02 "X-Api-Key" 0x00 0x01 uint64(3) "abc" 0x01 0x00 0x01
	// uint64(15) "ip:192.0.2.0/24", computed with Python's hmac module.
	const golden = "t:75151aa24247ee6ba528359005001f1f"
	withKey := key(e, request("/", "X-API-Key: abc"), clientIP)
	if withKey != golden {
		t.Errorf("combine: %q, want %q", withKey, golden)
	}
	if id := key(e, request("/", "X-API-Key: abc"), netip.MustParseAddr("192.0.2.200")); id != golden {
		t.Errorf("combine, same /24: %q, want %q", id, golden)
	}
	if id := key(e, request("/", "X-API-Key: abc"), netip.MustParseAddr("198.51.100.1")); id == golden {
		t.Error("combine, other ip: same id")
	}
	absent := key(e, request("/"), clientIP)
	empty := key(e, request("/", "X-API-Key:  "), clientIP)
	if !strings.HasPrefix(absent, "t:") || absent == golden || absent != empty {
		t.Errorf("combine, key absent: %q, empty: %q, want one t: id unlike %q", absent, empty, golden)
	}
	// Present and absent members must not collide: ("", absent) vs (absent, "").
	ab := newExtractor(t, config.KeySpec{Combine: true}, false, "header:A", "header:B")
	if x, y := key(ab, request("/", "A: v"), clientIP), key(ab, request("/", "B: v"), clientIP); x == y {
		t.Errorf("combine: A=v and B=v give the same id %q", x)
	}
	if x, y := key(ab, request("/", "A: ab", "B: c"), clientIP), key(ab, request("/", "A: a", "B: bc"), clientIP); x == y {
		t.Errorf("combine: (ab,c) and (a,bc) give the same id %q", x)
	}
	// All absent: the ip key, masked as configured.
	if id := key(ab, request("/"), clientIP); id != "ip:192.0.2.7" {
		t.Errorf("combine, all absent: %q, want ip:192.0.2.7", id)
	}
	// A combined single source differs from the plain single source.
	single := newExtractor(t, config.KeySpec{}, false, "header:A")
	if x, y := key(ab, request("/", "A: v", "B: w"), clientIP), key(single, request("/", "A: v"), clientIP); x == y || !strings.HasPrefix(x, "t:") {
		t.Errorf("combine vs single: %q and %q", x, y)
	}
}

func TestHashSecret(t *testing.T) {
	r := request("/", "X-API-Key: abc")
	spec := config.KeySpec{Sources: []config.Source{src(t, "header:X-API-Key")}}
	a, _ := New(spec, config.JWT{}, []byte("one"))
	b, _ := New(spec, config.JWT{}, []byte("two"))
	c, _ := New(spec, config.JWT{}, nil)
	if x, y, z := key(a, r, clientIP), key(b, r, clientIP), key(c, r, clientIP); x == y || y == z || x == z {
		t.Errorf("secrets one, two, none: ids %q %q %q, want all different", x, y, z)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		spec config.KeySpec
		err  string
	}{
		// Prefix ranges, source names and the JWT secret's length are
		// config's to check (internal/config load_test.go): New only
		// refuses a kind it does not know.
		{config.KeySpec{Sources: []config.Source{{Kind: 99}}}, "key source kind 99: unknown"},
		{config.KeySpec{Sources: []config.Source{{}}}, "key source kind 0: unknown"},
	}
	for _, tt := range tests {
		if _, err := New(tt.spec, config.JWT{}, testSecret); err == nil || err.Error() != tt.err {
			t.Errorf("New(%+v) error = %v, want %q", tt.spec, err, tt.err)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"h:0eca3ea4012e5b7a1f88d4b333a3853d": "h:0eca3ea4012e",
		"t:75151aa24247ee6ba528359005001f1f": "t:75151aa24247",
		"ip:2001:db8:1:2::/64":               "ip:2001:db8:1:2::/64",
		"global":                             "global",
		"h:short":                            "h:short",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAppend checks that Key appends to dst and leaves its prefix alone.
func TestAppend(t *testing.T) {
	e := newExtractor(t, config.KeySpec{}, false, "ip")
	dst := []byte("rl:v2:{")
	dst = e.Key(dst, request("/"), clientIP)
	if got := string(append(dst, "}:api"...)); got != "rl:v2:{ip:192.0.2.7}:api" {
		t.Errorf("store key %q", got)
	}
}

func TestAllocs(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts (the race detector makes sync.Pool drop items)")
	}
	v6 := netip.MustParseAddr("2001:db8:1:2::7")
	cases := []struct {
		name    string
		spec    config.KeySpec
		sources []string
		r       *reqview.View
		ip      netip.Addr
	}{
		{"ip", config.KeySpec{}, []string{"ip"}, request("/"), clientIP},
		{"ip /64", config.KeySpec{IPv6Prefix: 64}, []string{"ip"}, request("/"), v6},
		{"header", config.KeySpec{}, []string{"header:X-API-Key", "ip"}, request("/", "X-API-Key: abc"), clientIP},
		{"header absent", config.KeySpec{}, []string{"header:X-API-Key", "ip"}, request("/"), clientIP},
		{"query", config.KeySpec{}, []string{"query:k"}, request("/?a=1&k=abc"), clientIP},
		{"cookie", config.KeySpec{}, []string{"cookie:s"}, request("/", "Cookie: a=1; s=abc"), clientIP},
		{"combine", config.KeySpec{Combine: true}, []string{"header:X-API-Key", "ip"}, request("/", "X-API-Key: abc"), v6},
	}
	for _, c := range cases {
		e := newExtractor(t, c.spec, false, c.sources...)
		dst := make([]byte, 0, 64)
		if n := testing.AllocsPerRun(100, func() { dst = e.Key(dst[:0], c.r, c.ip) }); n != 0 {
			t.Errorf("%s: %v allocs per Key, want 0", c.name, n)
		}
	}
}

func BenchmarkKey(b *testing.B) {
	for _, c := range []struct {
		name    string
		sources []string
		r       *reqview.View
	}{
		{"ip", []string{"ip"}, request("/")},
		{"header", []string{"header:X-API-Key", "ip"}, request("/", "X-API-Key: 0123456789abcdef0123456789abcdef")},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := newExtractor(b, config.KeySpec{}, false, c.sources...)
			dst := make([]byte, 0, 64)
			b.ReportAllocs()
			for b.Loop() {
				dst = e.Key(dst[:0], c.r, clientIP)
			}
		})
	}
}

// TestSumOfCredentialID: the Sum Credentials gives a value, for each
// source in order, is what the id of a request carrying it spells, and
// CredentialKey returns it with that id; for any other id it returns none.
func TestSumOfCredentialID(t *testing.T) {
	e, err := New(config.KeySpec{Sources: []config.Source{{Kind: config.SourceHeader, Name: "X-Key"}, {Kind: config.SourceQuery, Name: "k"}}}, config.JWT{}, []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr("192.0.2.1")
	byHeader := httptest.NewRequest("GET", "/", nil)
	byHeader.Header.Set("X-Key", "v1")
	reqs := []*reqview.View{view(byHeader), view(httptest.NewRequest("GET", "/?k=v1", nil))}
	sums := e.Credentials(nil, " v1 ")
	if len(sums) != 2 || sums[0] == sums[1] {
		t.Fatalf("sums %x: want 2 distinct", sums)
	}
	for i, r := range reqs {
		key := string(e.Key(nil, r, ip))
		if want := "h:" + hex.EncodeToString(sums[i][:]); key != want {
			t.Errorf("source %d: Key %s, Credentials' sum spells %s", i, key, want)
		}
		id, sum, ok := e.CredentialKey(nil, r, ip)
		if string(id) != key || sum != sums[i] || !ok {
			t.Errorf("source %d: CredentialKey %s, %x, %v; want %s, %x, true", i, id, sum, ok, key, sums[i])
		}
	}
	if trimmed := e.Credentials(nil, "v1"); len(trimmed) != 2 || trimmed[0] != sums[0] || trimmed[1] != sums[1] {
		t.Errorf("sums of v1 %x, want those of \" v1 \" %x", trimmed, sums)
	}
	combined, err := New(config.KeySpec{Combine: true, Sources: []config.Source{{Kind: config.SourceHeader, Name: "X-Key"}}}, config.JWT{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ipOnly, err := New(config.KeySpec{Sources: []config.Source{{Kind: config.SourceIP}}}, config.JWT{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		e    *Extractor
		r    *reqview.View
		id   string
	}{
		{"no credential", e, request("/"), "ip:192.0.2.1"},
		{"ip key", ipOnly, view(byHeader), "ip:192.0.2.1"},
		{"combined", combined, view(byHeader), string(combined.Key(nil, view(byHeader), ip))},
	} {
		if id, sum, ok := c.e.CredentialKey(nil, c.r, ip); string(id) != c.id || sum != (Sum{}) || ok {
			t.Errorf("%s: CredentialKey %s, %x, %v; want %s, no sum", c.name, id, sum, ok, c.id)
		}
		if sums := c.e.Credentials(nil, "v1"); c.e != e && len(sums) != 0 {
			t.Errorf("%s: %d sums, want none", c.name, len(sums))
		}
	}
}
