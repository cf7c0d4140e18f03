package realip_test

import (
	"fmt"
	"net/http"
	"net/netip"

	"rlproxy/internal/config"
	"rlproxy/internal/realip"

	"rlproxy/internal/reqview"
)

func ExampleResolver_ClientIP() {
	r, err := realip.New(config.RealIP{
		Header:         "X-Forwarded-For",
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Recursive:      true,
	})
	if err != nil {
		panic(err)
	}
	h := http.Header{"X-Forwarded-For": {"203.0.113.50, 198.51.100.7, 10.0.0.2"}}
	// From a trusted load balancer: the first untrusted hop from the right.
	fmt.Println(r.ClientIP(netip.MustParseAddr("10.0.0.1"), reqview.StdHeaders(h)))
	// From anyone else the header is a claim: the peer is the client.
	fmt.Println(r.ClientIP(netip.MustParseAddr("192.0.2.1"), reqview.StdHeaders(h)))
	// Output:
	// 198.51.100.7
	// 192.0.2.1
}

func ExampleResolver_ForwardedFor() {
	r, err := realip.New(config.RealIP{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	})
	if err != nil {
		panic(err)
	}
	h := http.Header{"X-Forwarded-For": {"198.51.100.7"}}
	fmt.Println(r.ForwardedFor(netip.MustParseAddr("10.0.0.1"), reqview.StdHeaders(h)))
	fmt.Println(r.ForwardedFor(netip.MustParseAddr("192.0.2.1"), reqview.StdHeaders(h)))
	// Output:
	// 198.51.100.7, 10.0.0.1
	// 192.0.2.1
}
