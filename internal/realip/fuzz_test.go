package realip

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"rlproxy/internal/reqview"
)

// fuzzPeers are the peers FuzzClientIP picks from: trusted and untrusted,
// IPv4, IPv6 and IPv4-mapped.
var fuzzPeers = []string{"10.0.0.1", "127.0.0.1", "2001:db8::1", "::ffff:10.0.0.1", "203.0.113.9", "2001:db9::1"}

// FuzzClientIP checks, for any header, that ClientIP does not panic and
// returns a valid, unmapped, zone-less address that is the peer or appears
// in the header; and that an untrusted peer is always its own client.
func FuzzClientIP(f *testing.F) {
	for _, s := range []string{
		"1.2.3.4, 198.51.100.7, 10.0.0.2",
		"[2001:db9::1]:443, ::ffff:10.0.0.2",
		`for=1.2.3.4;proto=http, for="[2001:db9::1]:80", for=unknown`,
		`for="198.51.100.7:_x";ext="a,\"b", for=_hidden`,
		"010.0.0.1:0080 fe80::1%eth0 ,,",
		"",
	} {
		f.Add(uint8(0), uint8(0), true, s, "10.0.0.3")
		f.Add(uint8(2), uint8(2), false, s, "")
	}
	headers := []string{"X-Forwarded-For", "X-Real-IP", "Forwarded"}
	resolvers := make([]*Resolver, 2*len(headers))
	for i := range resolvers {
		resolvers[i] = newResolver(f, headers[i/2], i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, peerIdx, hdrIdx uint8, recursive bool, line1, line2 string) {
		peer := netip.MustParseAddr(fuzzPeers[int(peerIdx)%len(fuzzPeers)])
		hi := int(hdrIdx) % len(headers)
		r := resolvers[2*hi]
		if !recursive {
			r = resolvers[2*hi+1]
		}
		h := http.Header{headers[hi]: {line1, line2}}
		got := r.ClientIP(peer, reqview.StdHeaders(h))
		if !got.IsValid() || got.Is4In6() || got.Zone() != "" {
			t.Fatalf("ClientIP(%v, %q) = %#v: want a valid, unmapped, zone-less address", peer, h, got)
		}
		if got == peer.Unmap() {
			return
		}
		if !r.isTrusted(peer.Unmap()) {
			t.Fatalf("untrusted peer %v: ClientIP = %v from header %q", peer, got, h)
		}
		if !appearsIn(got, line1+","+line2) {
			t.Fatalf("ClientIP(%v, %q) = %v: not the peer and not in the header", peer, h, got)
		}
	})
}

// appearsIn reports whether a appears in s in any spelling, found by an
// extraction independent of the package's parsers: split on every delimiter
// the header syntaxes use, then try each piece bare, without brackets, and
// without a port.
func appearsIn(a netip.Addr, s string) bool {
	for _, piece := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(" \t,;=\"", r) }) {
		cands := []string{piece}
		if host, _, ok := strings.Cut(piece, "]"); ok {
			cands = append(cands, strings.TrimPrefix(host, "["))
		}
		if host, _, ok := strings.Cut(piece, ":"); ok {
			cands = append(cands, host)
		}
		for _, c := range cands {
			if b, err := netip.ParseAddr(c); err == nil && b.Unmap() == a {
				return true
			}
		}
	}
	return false
}
