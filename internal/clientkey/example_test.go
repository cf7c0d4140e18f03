package clientkey_test

import (
	"fmt"
	"net/http/httptest"
	"net/netip"

	"rlproxy/internal/clientkey"
	"rlproxy/internal/config"
	"rlproxy/internal/reqview"
)

func ExampleExtractor_Key() {
	// key: [header:X-API-Key, ip] with ipv6_prefix: 64
	e, err := clientkey.New(config.KeySpec{
		Sources: []config.Source{
			{Kind: config.SourceHeader, Name: "X-API-Key"},
			{Kind: config.SourceIP},
		},
		IPv6Prefix: 64,
	}, config.JWT{}, []byte("key_hash_secret"))
	if err != nil {
		panic(err)
	}
	ip := netip.MustParseAddr("2001:db8:1:2::7")
	buf := make([]byte, 0, 64) // reused across requests: no allocation

	r := httptest.NewRequest("GET", "/api/", nil)
	v, _ := reqview.Read(r) // the view reads r's header map in place
	buf = append(buf[:0], "rl:v2:{"...)
	buf = e.Key(buf, &v, ip)
	buf = append(buf, "}:api"...)
	fmt.Println(string(buf))

	r.Header.Set("X-API-Key", "sk_live_123")
	id := e.Key(nil, &v, ip)
	fmt.Println(clientkey.Redact(string(id)))
	// Output:
	// rl:v2:{ip:2001:db8:1:2::/64}:api
	// h:dc6e317e0206
}
