package clientkey

import (
	"net/netip"
	"testing"

	"rlproxy/internal/config"
	"rlproxy/internal/reqview"
)

// FuzzKey checks that for any header, query, cookie, token and address Key
// does not panic and returns a deterministic, non-empty id of at most MaxLen
// bytes in the safe alphabet, for every source kind, list and combine.
func FuzzKey(f *testing.F) {
	valid := mintJWT(hs256, `{"sub":"alice","uid":7,"exp":1700000100}`, jwtSecret)
	for _, s := range []struct{ hdr, query, cookie, auth string }{
		{"abc", "k=abc", "s=abc", "Bearer " + valid},
		{"", "k=%zz&k=+", `s="x"; s=y`, "Bearer a.b.c"},
		{" \t", ";k=1&&=", "s", "bearer " + tamper(valid, `{"sub":{}}`)},
	} {
		f.Add(s.hdr, s.query, s.cookie, s.auth, []byte{192, 0, 2, 7}, uint8(0))
		f.Add(s.hdr, s.query, s.cookie, s.auth, netip.MustParseAddr("2001:db8::1").AsSlice(), uint8(3))
	}
	specs := []struct {
		spec    config.KeySpec
		verify  bool
		sources []string
	}{
		{config.KeySpec{}, false, []string{"header:X-Key", "query:k", "cookie:s", "jwt:sub", "ip"}},
		{config.KeySpec{}, true, []string{"jwt:sub", "jwt:uid"}},
		{config.KeySpec{Combine: true, IPv4Prefix: 24, IPv6Prefix: 64}, true, []string{"header:X-Key", "query:k", "cookie:s", "jwt:sub", "ip"}},
		{config.KeySpec{Combine: true}, false, []string{"cookie:s", "jwt:uid", "global"}},
		{config.KeySpec{IPv4Prefix: 8, IPv6Prefix: 1}, false, []string{"query:k", "global"}},
	}
	extractors := make([]*Extractor, len(specs))
	for i, s := range specs {
		extractors[i] = newExtractor(f, s.spec, s.verify, s.sources...)
	}
	f.Fuzz(func(t *testing.T, hdr, query, cookie, auth string, ip []byte, which uint8) {
		e := extractors[int(which)%len(extractors)]
		addr, _ := netip.AddrFromSlice(ip) // invalid when len(ip) is not 4 or 16
		r := &reqview.View{
			Query: query,
			Header: reqview.StdHeaders{
				"X-Key":         {hdr},
				"Cookie":        {cookie},
				"Authorization": {auth},
			},
		}
		id := e.Key(nil, r, addr)
		checkSafe(t, string(id))
		if again := e.Key(make([]byte, 0, MaxLen), r, addr); string(again) != string(id) {
			t.Fatalf("Key not deterministic: %q then %q", id, again)
		}
	})
}
