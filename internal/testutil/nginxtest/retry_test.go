package nginxtest

import (
	"io"
	"net"
	"net/http"
	"testing"

	"rlproxy/internal/testutil/netutil"
)

// TestStartRetriesTakenPort offers start a port another listener holds
// (and accepts on, so a readiness check by connecting alone would be
// fooled): nginx fails to bind it, and start tries a second address, on
// which the answer is nginx's.
func TestStartRetriesTakenPort(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	go func() {
		for {
			c, err := held.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	var picks []string
	s := start(t, `server { listen {{listen}}; location / { return 200 "nginx"; } }`, func() string {
		a := held.Addr().String()
		if len(picks) > 0 {
			a = netutil.FreeAddr(t)
		}
		picks = append(picks, a)
		return a
	})
	if len(picks) != 2 || s.Addr != picks[1] || s.Addr == held.Addr().String() {
		t.Fatalf("picks %v, server on %s: want a second pick, not the held %s", picks, s.Addr, held.Addr())
	}
	resp, err := http.Get(s.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "nginx" {
		t.Fatalf("got %d %q, want 200 \"nginx\"", resp.StatusCode, b)
	}
}
