package realip

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"rlproxy/internal/config"

	"rlproxy/internal/reqview"
)

// trustedNets is the trusted_proxies list of most tests: a private /8, one
// loopback host and a documentation IPv6 /32 (RFC 3849).
var trustedNets = []string{"10.0.0.0/8", "127.0.0.1/32", "2001:db8::/32"}

func newResolver(t testing.TB, header string, recursive bool, nets ...string) *Resolver {
	t.Helper()
	if nets == nil {
		nets = trustedNets
	}
	cfg := config.RealIP{Header: header, Recursive: recursive}
	for _, n := range nets {
		cfg.TrustedProxies = append(cfg.TrustedProxies, netip.MustParsePrefix(n))
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// hdr builds a header with the given lines for one name, added in order.
func hdr(name string, lines ...string) http.Header {
	h := http.Header{}
	for _, l := range lines {
		h.Add(name, l)
	}
	return h
}

func TestClientIP(t *testing.T) {
	const xff, xri, fwd = "X-Forwarded-For", "X-Real-IP", "Forwarded"
	tests := []struct {
		name      string
		header    string // real_ip header
		recursive bool
		peer      string
		h         http.Header
		want      string
	}{
		// Spoofing: an untrusted peer's header is never read.
		{"untrusted peer keyed by itself", xff, true, "203.0.113.9", hdr(xff, "1.2.3.4"), "203.0.113.9"},
		{"untrusted peer, trusted-looking header", xff, true, "203.0.113.9", hdr(xff, "10.0.0.1"), "203.0.113.9"},
		{"untrusted peer, X-Real-IP", xri, true, "203.0.113.9", hdr(xri, "1.2.3.4"), "203.0.113.9"},
		{"untrusted peer, Forwarded", fwd, true, "203.0.113.9", hdr(fwd, "for=1.2.3.4"), "203.0.113.9"},
		{"trusted peer, no header", xff, true, "10.0.0.1", http.Header{}, "10.0.0.1"},
		{"trusted peer, other header only", xff, true, "10.0.0.1", hdr(xri, "1.2.3.4"), "10.0.0.1"},

		// Recursive on: the first untrusted address from the right.
		{"recursive: last untrusted", xff, true, "10.0.0.1", hdr(xff, "1.2.3.4, 198.51.100.7, 10.0.0.2, 10.1.1.1"), "198.51.100.7"},
		{"recursive: rightmost untrusted", xff, true, "10.0.0.1", hdr(xff, "1.2.3.4, 198.51.100.7"), "198.51.100.7"},
		{"recursive: all trusted gives leftmost", xff, true, "10.0.0.1", hdr(xff, "10.0.0.3, 127.0.0.1, 10.0.0.2"), "10.0.0.3"},
		{"recursive: spaces only as separators", xff, true, "10.0.0.1", hdr(xff, "1.2.3.4 198.51.100.7 10.0.0.2"), "198.51.100.7"},
		{"recursive: empty entries skipped", xff, true, "10.0.0.1", hdr(xff, " , 198.51.100.7,, 10.0.0.2 ,, "), "198.51.100.7"},
		// Recursive off: the rightmost address, trusted or not.
		{"non-recursive: rightmost", xff, false, "10.0.0.1", hdr(xff, "1.2.3.4, 198.51.100.7, 10.0.0.2"), "10.0.0.2"},
		{"non-recursive: single", xff, false, "10.0.0.1", hdr(xff, "198.51.100.7"), "198.51.100.7"},

		// Several lines form one list, in order.
		{"multi-line: untrusted in first line", xff, true, "10.0.0.1", hdr(xff, "1.2.3.4, 198.51.100.7", "10.0.0.2", "10.0.0.3"), "198.51.100.7"},
		{"multi-line: all trusted gives leftmost of first", xff, true, "10.0.0.1", hdr(xff, "10.9.9.9, 10.0.0.4", "10.0.0.2"), "10.9.9.9"},
		{"multi-line: non-recursive uses the last line", xff, false, "10.0.0.1", hdr(xff, "1.2.3.4", "198.51.100.7"), "198.51.100.7"},
		{"multi-line: empty line stops the walk", xff, true, "10.0.0.1", hdr(xff, "198.51.100.7", "", "10.0.0.2"), "10.0.0.2"},
		{"multi-line: empty last line", xff, false, "10.0.0.1", hdr(xff, "198.51.100.7", ""), "10.0.0.1"},
		{"leading comma ends in a bad hop", xff, true, "10.0.0.1", hdr(xff, ",198.51.100.7, 10.0.0.2"), "10.0.0.2"},
		{"tab is not a separator", xff, true, "10.0.0.1", hdr(xff, "198.51.100.7,\t10.0.0.2"), "10.0.0.1"},

		// IPv4-mapped and IPv6 spellings match by address.
		{"mapped peer matches 10/8", xff, true, "::ffff:10.0.0.1", hdr(xff, "198.51.100.7"), "198.51.100.7"},
		{"mapped untrusted peer returned unmapped", xff, true, "::ffff:203.0.113.9", hdr(xff, "1.2.3.4"), "203.0.113.9"},
		{"mapped hop is trusted", xff, true, "10.0.0.1", hdr(xff, "198.51.100.7, ::ffff:10.0.0.2"), "198.51.100.7"},
		{"mapped client returned unmapped", xff, true, "10.0.0.1", hdr(xff, "::FFFF:198.51.100.7"), "198.51.100.7"},
		{"IPv6 peer, upper-case uncompressed hop", xff, true, "2001:db8::1", hdr(xff, "2001:DB8:0:0:0:0:0:2, 2001:0db8::3"), "2001:db8::2"},
		{"IPv6 hops: first untrusted", xff, true, "2001:db8::1", hdr(xff, "2001:db9::5, 2001:DB8:0:0:0:0:0:2"), "2001:db9::5"},
		{"IPv6 peer with zone", xff, true, "2001:db8::1%eth0", hdr(xff, "2001:db9::5"), "2001:db9::5"},

		// Ports are stripped; nginx ngx_parse_addr_port rules.
		{"IPv4 with port", xff, true, "10.0.0.1", hdr(xff, "198.51.100.7:5678"), "198.51.100.7"},
		{"IPv6 bracketed with port", xff, true, "10.0.0.1", hdr(xff, "[2001:db9::1]:443"), "2001:db9::1"},
		{"trusted hop with port", xff, true, "10.0.0.1", hdr(xff, "198.51.100.7, 10.0.0.2:80"), "198.51.100.7"},

		// Unparsable entries stop the walk: the last good address.
		{"garbage rightmost gives peer", xff, true, "10.0.0.1", hdr(xff, "198.51.100.7, bogus"), "10.0.0.1"},
		{"garbage behind trusted hop gives that hop", xff, true, "10.0.0.1", hdr(xff, "198.51.100.7, bogus, 10.0.0.2"), "10.0.0.2"},
		{"garbage left of client is never reached", xff, true, "10.0.0.1", hdr(xff, "bogus, 198.51.100.7"), "198.51.100.7"},
		{"bracketed without port", xff, true, "10.0.0.1", hdr(xff, "[2001:db9::1]"), "10.0.0.1"},
		{"port 0", xff, true, "10.0.0.1", hdr(xff, "198.51.100.7:0"), "10.0.0.1"},
		{"port 65536", xff, true, "10.0.0.1", hdr(xff, "198.51.100.7:65536"), "10.0.0.1"},
		{"empty port", xff, true, "10.0.0.1", hdr(xff, "198.51.100.7:"), "10.0.0.1"},
		{"zone in hop", xff, true, "10.0.0.1", hdr(xff, "fe80::1%eth0"), "10.0.0.1"},
		{"octal-looking octet", xff, true, "10.0.0.1", hdr(xff, "010.0.0.1"), "10.0.0.1"},
		{"hostname", xff, true, "10.0.0.1", hdr(xff, "example.com"), "10.0.0.1"},
		{"only separators", xff, true, "10.0.0.1", hdr(xff, " , ,"), "10.0.0.1"},
		{"non-recursive garbage gives peer", xff, false, "10.0.0.1", hdr(xff, "1.2.3.4, garbage"), "10.0.0.1"},

		// X-Real-IP: first line, walked like nginx does.
		{"x-real-ip", xri, true, "10.0.0.1", hdr(xri, "198.51.100.7"), "198.51.100.7"},
		{"x-real-ip trusted value", xri, true, "10.0.0.1", hdr(xri, "10.0.0.2"), "10.0.0.2"},
		{"x-real-ip first line only", xri, true, "10.0.0.1", hdr(xri, "198.51.100.7", "1.2.3.4"), "198.51.100.7"},
		{"x-real-ip with port", xri, false, "127.0.0.1", hdr(xri, "[2001:db9::1]:8080"), "2001:db9::1"},
		{"x-real-ip garbage", xri, true, "10.0.0.1", hdr(xri, "nope"), "10.0.0.1"},

		// Forwarded, RFC 7239.
		{"forwarded token", fwd, true, "10.0.0.1", hdr(fwd, "for=198.51.100.7"), "198.51.100.7"},
		{"forwarded quoted IPv6 with port", fwd, true, "10.0.0.1", hdr(fwd, `for="[2001:db9:cafe::17]:4711"`), "2001:db9:cafe::17"},
		{"forwarded quoted IPv6, no port", fwd, true, "10.0.0.1", hdr(fwd, `For="[2001:DB9::17]"`), "2001:db9::17"},
		{"forwarded quoted IPv4 with port", fwd, true, "10.0.0.1", hdr(fwd, `for="198.51.100.7:80"`), "198.51.100.7"},
		{"forwarded obfuscated port", fwd, true, "10.0.0.1", hdr(fwd, `for="198.51.100.7:_p1"`), "198.51.100.7"},
		{"forwarded other params", fwd, true, "10.0.0.1", hdr(fwd, `proto=https;for=198.51.100.7;by=10.0.0.1;host="a.example"`), "198.51.100.7"},
		{"forwarded chain, recursive", fwd, true, "10.0.0.1", hdr(fwd, `for=1.2.3.4, for=198.51.100.7;proto=http, for="10.0.0.2"`), "198.51.100.7"},
		{"forwarded chain, non-recursive", fwd, false, "10.0.0.1", hdr(fwd, `for=1.2.3.4, for=198.51.100.7, for="10.0.0.2"`), "10.0.0.2"},
		{"forwarded lines combined", fwd, true, "10.0.0.1", hdr(fwd, "for=198.51.100.7", "for=10.0.0.2;proto=https"), "198.51.100.7"},
		{"forwarded all trusted gives leftmost", fwd, true, "10.0.0.1", hdr(fwd, "for=10.0.0.9, for=10.0.0.2"), "10.0.0.9"},
		{"forwarded comma inside quotes", fwd, true, "10.0.0.1", hdr(fwd, `for=198.51.100.7;ext="a, for=1.2.3.4"`), "198.51.100.7"},
		{"forwarded escaped quote is bad", fwd, true, "10.0.0.1", hdr(fwd, `for=1.2.3.4, for=10.0.0.2;x="a\", for=1.1.1.1"`), "10.0.0.1"},
		{"forwarded unknown stops", fwd, true, "10.0.0.1", hdr(fwd, "for=198.51.100.7, for=unknown, for=10.0.0.2"), "10.0.0.2"},
		{"forwarded obfuscated stops", fwd, true, "10.0.0.1", hdr(fwd, "for=198.51.100.7, for=_hidden"), "10.0.0.1"},
		{"forwarded element without for stops", fwd, true, "10.0.0.1", hdr(fwd, "for=198.51.100.7, proto=https"), "10.0.0.1"},
		{"forwarded duplicate for stops", fwd, true, "10.0.0.1", hdr(fwd, "for=198.51.100.7;for=1.2.3.4"), "10.0.0.1"},
		{"forwarded bare IPv6 in quotes is bad", fwd, true, "10.0.0.1", hdr(fwd, `for="2001:db9::1"`), "10.0.0.1"},
		{"forwarded IPv6 unquoted (lenient)", fwd, true, "10.0.0.1", hdr(fwd, `for=[2001:db9::1]:80`), "2001:db9::1"},
		{"forwarded unterminated quote", fwd, true, "10.0.0.1", hdr(fwd, `for="198.51.100.7`), "10.0.0.1"},
		{"forwarded garbage left of client", fwd, true, "10.0.0.1", hdr(fwd, `for=@@@, for=198.51.100.7`), "198.51.100.7"},
		{"forwarded garbage then trusted", fwd, true, "10.0.0.1", hdr(fwd, `;;==, for=10.0.0.2`), "10.0.0.2"},
		{"forwarded empty elements", fwd, true, "10.0.0.1", hdr(fwd, ` , for=198.51.100.7 ,, `), "198.51.100.7"},
		{"forwarded port too long", fwd, true, "10.0.0.1", hdr(fwd, `for="198.51.100.7:123456"`), "10.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newResolver(t, tt.header, tt.recursive)
			got := r.ClientIP(netip.MustParseAddr(tt.peer), reqview.StdHeaders(tt.h))
			if got != netip.MustParseAddr(tt.want) {
				t.Errorf("ClientIP(%s, %v) = %v, want %s", tt.peer, tt.h, got, tt.want)
			}
		})
	}
}

// TestForwardedHopCap checks that a Forwarded walk reaches exactly
// maxForwardedHops elements from the right, however long the header.
func TestForwardedHopCap(t *testing.T) {
	r := newResolver(t, "Forwarded", true)
	trustedHops := func(n int) string {
		s := make([]string, n)
		for i := range s {
			s[i] = "for=10.0.0.2"
		}
		return strings.Join(s, ", ")
	}
	peer := netip.MustParseAddr("10.0.0.1")
	// 63 trusted hops after the client: the client is the 64th from the right.
	h := hdr("Forwarded", "for=198.51.100.7, "+trustedHops(maxForwardedHops-1))
	if got := r.ClientIP(peer, reqview.StdHeaders(h)); got != netip.MustParseAddr("198.51.100.7") {
		t.Errorf("64th hop: got %v, want 198.51.100.7", got)
	}
	// 64 trusted hops after the client: the walk stops at the last one.
	h = hdr("Forwarded", "for=198.51.100.7, "+trustedHops(maxForwardedHops))
	if got := r.ClientIP(peer, reqview.StdHeaders(h)); got != netip.MustParseAddr("10.0.0.2") {
		t.Errorf("65th hop: got %v, want 10.0.0.2", got)
	}
}

func TestNew(t *testing.T) {
	for _, h := range []string{"", "x-forwarded-for", "X-REAL-IP", "forwarded"} {
		if _, err := New(config.RealIP{Header: h}); err != nil {
			t.Errorf("New(header %q): %v", h, err)
		}
	}
	if _, err := New(config.RealIP{Header: "CF-Connecting-IP"}); err == nil ||
		err.Error() != `real_ip header "CF-Connecting-IP": want X-Forwarded-For, X-Real-IP or Forwarded` {
		t.Errorf("New(unknown header) error = %v", err)
	}
	if _, err := New(config.RealIP{TrustedProxies: []netip.Prefix{{}}}); err == nil {
		t.Error("New(invalid prefix): no error")
	}
	// A mapped prefix trusts the IPv4 addresses it maps.
	r := newResolver(t, "", true, "::ffff:10.0.0.0/104")
	if got := r.ClientIP(netip.MustParseAddr("10.1.2.3"), reqview.StdHeaders(hdr("X-Forwarded-For", "198.51.100.7"))); got != netip.MustParseAddr("198.51.100.7") {
		t.Errorf("mapped prefix: got %v, want 198.51.100.7", got)
	}
	// A host prefix written unmasked still matches its network.
	r = newResolver(t, "", true, "10.1.2.3/8")
	if got := r.ClientIP(netip.MustParseAddr("10.200.0.1"), reqview.StdHeaders(hdr("X-Forwarded-For", "198.51.100.7"))); got != netip.MustParseAddr("198.51.100.7") {
		t.Errorf("unmasked prefix: got %v, want 198.51.100.7", got)
	}
}

func TestForwardedFor(t *testing.T) {
	const xff = "X-Forwarded-For"
	tests := []struct {
		name   string
		header string // real_ip header: ForwardedFor reads X-Forwarded-For regardless
		peer   string
		h      http.Header
		want   string
	}{
		{"untrusted peer drops the client's header", xff, "203.0.113.9", hdr(xff, "1.2.3.4"), "203.0.113.9"},
		{"untrusted peer, no header", xff, "203.0.113.9", http.Header{}, "203.0.113.9"},
		{"untrusted mapped peer", xff, "::ffff:203.0.113.9", hdr(xff, "1.2.3.4"), "203.0.113.9"},
		{"trusted peer appended", xff, "10.0.0.1", hdr(xff, "198.51.100.7, 10.0.0.2"), "198.51.100.7, 10.0.0.2, 10.0.0.1"},
		{"trusted peer, lines combined", xff, "10.0.0.1", hdr(xff, "198.51.100.7", " ", "10.0.0.2,"), "198.51.100.7, 10.0.0.2, 10.0.0.1"},
		{"trusted peer, no header", xff, "10.0.0.1", http.Header{}, "10.0.0.1"},
		{"trusted IPv6 peer", xff, "2001:db8::1", hdr(xff, "198.51.100.7"), "198.51.100.7, 2001:db8::1"},
		{"forwarded resolver still forwards XFF", "Forwarded", "10.0.0.1", hdr(xff, "198.51.100.7"), "198.51.100.7, 10.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newResolver(t, tt.header, true)
			if got := r.ForwardedFor(netip.MustParseAddr(tt.peer), reqview.StdHeaders(tt.h)); got != tt.want {
				t.Errorf("ForwardedFor = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAllocs(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts (the race detector makes sync.Pool drop items)")
	}
	r := newResolver(t, "", true)
	trusted := netip.MustParseAddr("10.0.0.1")
	h := hdr("X-Forwarded-For", "1.2.3.4, 198.51.100.7, 10.0.0.2", "10.0.0.3")
	fh := hdr("Forwarded", `for=1.2.3.4, for="[2001:db9::1]:80", for=10.0.0.2`)
	rf := newResolver(t, "Forwarded", true)
	for name, f := range map[string]func(){
		"xff":       func() { r.ClientIP(trusted, reqview.StdHeaders(h)) },
		"forwarded": func() { rf.ClientIP(trusted, reqview.StdHeaders(fh)) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocs per ClientIP, want 0", name, n)
		}
	}
	if n := testing.AllocsPerRun(100, func() { r.ForwardedFor(trusted, reqview.StdHeaders(h)) }); n != 1 {
		t.Errorf("%v allocs per ForwardedFor, want 1", n)
	}
}

func BenchmarkClientIP(b *testing.B) {
	r := newResolver(b, "", true)
	h := hdr("X-Forwarded-For", "1.2.3.4, 198.51.100.7, 10.0.0.2")
	peer := netip.MustParseAddr("10.0.0.1")
	b.ReportAllocs()
	for b.Loop() {
		r.ClientIP(peer, reqview.StdHeaders(h))
	}
}

func BenchmarkForwardedFor(b *testing.B) {
	r := newResolver(b, "", true)
	h := hdr("X-Forwarded-For", "1.2.3.4, 198.51.100.7, 10.0.0.2")
	peer := netip.MustParseAddr("10.0.0.1")
	b.ReportAllocs()
	for b.Loop() {
		r.ForwardedFor(peer, reqview.StdHeaders(h))
	}
}
