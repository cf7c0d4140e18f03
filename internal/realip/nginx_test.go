package realip

import (
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"rlproxy/internal/testutil/nginxtest"

	"rlproxy/internal/reqview"
)

// nginxBody is three servers with realip on one port, chosen by Host, each
// answering $remote_addr: X-Forwarded-For recursive, X-Forwarded-For
// non-recursive, X-Real-IP recursive. The trusted list is trustedNets.
// (Server level, not location: a location's realip runs after `return`.)
const nginxBody = `
	set_real_ip_from 10.0.0.0/8;
	set_real_ip_from 127.0.0.1/32;
	set_real_ip_from 2001:db8::/32;
	server { listen {{listen}}; server_name xff-recursive; real_ip_header X-Forwarded-For; real_ip_recursive on;  location / { return 200 $remote_addr; } }
	server { listen {{listen}}; server_name xff-last;      real_ip_header X-Forwarded-For; real_ip_recursive off; location / { return 200 $remote_addr; } }
	server { listen {{listen}}; server_name x-real-ip;     real_ip_header X-Real-IP;       real_ip_recursive on;  location / { return 200 $remote_addr; } }
`

// TestNginxDifferential sends the same headers to a real nginx (Debian's
// nginx-light has realip) and to ClientIP, from the trusted peer 127.0.0.1,
// and wants the same client address. The corpus leaves out the documented
// deviations: IPv4 octets with leading zeros or missing, and IPv4-mapped
// addresses.
func TestNginxDifferential(t *testing.T) {
	ng := nginxtest.Start(t, nginxBody)

	xff := [][]string{
		{"1.2.3.4"},
		{"1.2.3.4, 10.0.0.2"},
		{"1.2.3.4, 198.51.100.7, 10.0.0.2, 10.1.1.1"},
		{"10.0.0.3, 127.0.0.1, 10.0.0.2"},
		{"1.2.3.4 198.51.100.7 10.0.0.2"},
		{"198.51.100.7,, 10.0.0.2 ,,"},
		{", ,"},
		{"198.51.100.7:5678"},
		{"[2001:db9::1]:443"},
		{"198.51.100.7, 10.0.0.2:80"},
		{"[2001:db8::5]:80, [2001:db8::6]:443"},
		{"198.51.100.7, bogus"},
		{"198.51.100.7, bogus, 10.0.0.2"},
		{"bogus, 198.51.100.7"},
		{"[2001:db9::1]"},
		{"198.51.100.7:0"},
		{"198.51.100.7:65535"},
		{"198.51.100.7:65536"},
		{"198.51.100.7:"},
		{"example.com"},
		{"2001:DB8:0:0:0:0:0:2, 2001:0db8::3"},
		{"2001:db9::5, 2001:DB8:0:0:0:0:0:2"},
		{"1.2.3.4, 198.51.100.7", "10.0.0.2", "10.0.0.3"},
		{"10.9.9.9, 10.0.0.4", "10.0.0.2"},
		{"198.51.100.7", "10.0.0.2"},
		{"198.51.100.7", "bogus"},
		{"bogus", "10.0.0.2"},
		{"1.2.3.4", "198.51.100.7"},
		{"1.2.3.4, 10.0.0.5", "10.0.0.4, 10.0.0.3"},
		{"198.51.100.7", "", "10.0.0.2"},
		{"10.0.0.2", ""},
		{",198.51.100.7, 10.0.0.2"},
		{",10.0.0.2"},
		{"198.51.100.7,\t10.0.0.2"},
		{"198.51.100.7\t, 10.0.0.2"},
	}
	xri := [][]string{
		{"198.51.100.7"},
		{"10.0.0.2"},
		{"[2001:db9::1]:8080"},
		{"nope"},
		{"1.2.3.4, 10.0.0.2"},
		{"1.2.3.4, 10.0.0.2", "198.51.100.9"},
	}
	peer := netip.MustParseAddr("127.0.0.1")
	runs := []struct {
		host      string
		header    string
		recursive bool
		corpus    [][]string
	}{
		{"xff-recursive", "X-Forwarded-For", true, xff},
		{"xff-last", "X-Forwarded-For", false, xff},
		{"x-real-ip", "X-Real-IP", true, xri},
	}
	for _, run := range runs {
		r := newResolver(t, run.header, run.recursive)
		for _, lines := range run.corpus {
			h := hdr(run.header, lines...)
			want := nginxRemoteAddr(t, ng.URL, run.host, h)
			if got := r.ClientIP(peer, reqview.StdHeaders(h)); got != want {
				t.Errorf("%s recursive=%v %q: ClientIP = %v, nginx = %v", run.header, run.recursive, lines, got, want)
			}
		}
	}
}

// nginxRemoteAddr asks nginx at url, server host, for $remote_addr with
// headers h.
func nginxRemoteAddr(t *testing.T, url, host string, h http.Header) netip.Addr {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header, req.Host = h, host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("nginx: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a, err := netip.ParseAddr(strings.TrimSpace(string(body)))
	if err != nil {
		t.Fatalf("nginx answered %q: %v", body, err)
	}
	return a
}
