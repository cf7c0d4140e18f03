package e2e

import (
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"rlproxy/internal/testutil/rlproxytest"
)

// TestH2CListenerTools: with server.h2c, curl --http2-prior-knowledge
// gets HTTP/2 and HTTP/1.1 keeps working on the same port; h2load (nghttp2)
// sends 2000 requests over 10 connections × 10 streams with 0 errors.
func TestH2CListenerTools(t *testing.T) {
	curl, h2load := e2eTool(t, "curl"), e2eTool(t, "h2load")
	up := rlproxytest.NewUpstream(t)
	in := rlproxytest.Start(t, fmt.Sprintf(`
server: { h2c: true }
upstreams: { app: { url: %q } }
routes: [ { name: r, upstream: app } ]
`, up.URL))
	for _, c := range []struct{ flag, want string }{
		{"--http2-prior-knowledge", "2 200 ok"},
		{"--http1.1", "1.1 200 ok"},
	} {
		out, err := exec.Command(curl, "-sS", c.flag, "-w", " %{http_version} %{http_code}", in.URL+"/x").CombinedOutput()
		got := strings.TrimSpace(string(out))
		if body, rest, _ := strings.Cut(got, " "); err != nil || rest+" "+body != c.want {
			t.Errorf("curl %s: %q (%v), want %q", c.flag, got, err, c.want)
		}
	}
	resp, _ := rlproxytest.Get(t, nil, in.URL+"/")
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 1 {
		t.Errorf("Go HTTP/1.1 client: %d %s", resp.StatusCode, resp.Proto)
	}
	out, err := exec.Command(h2load, "-n", "2000", "-c", "10", "-m", "10", in.URL+"/load").CombinedOutput()
	m := regexp.MustCompile(`requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored`).FindStringSubmatch(string(out))
	if err != nil || m == nil || m[3] != "2000" || m[4] != "0" || m[5] != "0" {
		t.Fatalf("h2load: %v\n%s", err, out)
	}
	t.Logf("h2load: %s", m[0])
}
