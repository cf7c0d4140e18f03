package policy

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/config"
	"rlproxy/internal/reqview"
	"rlproxy/internal/store/memory"
	"rlproxy/internal/testutil/nginxtest"
)

// matchRoutes and matchLocations are one set of routes as rlproxy routes
// and as nginx locations. rlproxy takes the first match in file order,
// nginx the exact location, else the longest prefix: longer prefixes come
// first, so both orders choose alike.
const matchRoutes = `
upstreams: { app: { url: "http://127.0.0.1:1" } }
routes:
  - { name: login, upstream: app, match: { path: /login } }
  - { name: admin-x, upstream: app, match: { path_prefix: /admin/x/ } }
  - { name: admin, upstream: app, match: { path_prefix: /admin/ } }
  - { name: dots, upstream: app, match: { path_prefix: /.. } }
  - { name: a, upstream: app, match: { path_prefix: /a } }
  - { name: all, upstream: app }
`

const matchLocations = `
    server {
        listen {{listen}};
        location = /login { return 200 "login"; }
        location /admin/x/ { return 200 "admin-x"; }
        location /admin/ { return 200 "admin"; }
        location /.. { return 200 "dots"; }
        location /a { return 200 "a"; }
        location / { return 200 "all"; }
    }`

// matchTokens are the pieces matchPaths builds paths from: segments,
// dot segments in every spelling, slashes raw and escaped, escapes that
// decode to letters, "%", "?" and "#".
var matchTokens = []string{
	"a", "admin", "x", "login", "b", "admin/x/", "admin%2fx%2F", ".", "..", "...", "..x", "/", "//",
	"%2e", "%2E", "%2e%2e", ".%2e", "%2E.", "%2f", "%2F", "%2f%2f", "%61", "%6c%6fgin", "%41dmin",
	"%2fadmin", "%25", "%252e", "%3f", "%3F", "%23", ";x",
}

// matchBad are the malformed escapes, rarer than matchTokens in a path.
var matchBad = []string{"%00", "%", "%2", "%zz"}

// matchPaths returns n random paths of matchTokens (seeded: the same
// paths every run), after the issue's own.
func matchPaths(n int) []string {
	paths := []string{"/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/admin%2Fx", "/admin%2fx/", "//login", "/x/../login", "/../login"}
	rng := rand.New(rand.NewPCG(25, 2026))
	for range n / 3 {
		paths = append(paths, respell(rng, [...]string{"/login", "/admin/x/y", "/admin/z", "/a"}[rng.IntN(4)]))
	}
	for len(paths) < n {
		var b strings.Builder
		b.WriteByte('/')
		for range 1 + rng.IntN(8) {
			tok := matchTokens[rng.IntN(len(matchTokens))]
			if rng.IntN(20) == 0 {
				tok = matchBad[rng.IntN(len(matchBad))]
			}
			b.WriteString(tok)
			if rng.IntN(2) == 0 {
				b.WriteByte('/')
			}
		}
		paths = append(paths, b.String())
	}
	return paths
}

// respell returns a random spelling of the clean path p that nginx reads
// as p: letters %-escaped (either case of hex), slashes doubled or
// escaped, "./" and "seg/../" detours.
func respell(rng *rand.Rand, p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '/':
			b.WriteString([...]string{"/", "/", "//", "%2f", "%2F", "/./", "/%2e/", "/q/../", "/q/%2e%2e/", "/q%2f..%2f"}[rng.IntN(10)])
		case rng.IntN(4) == 0:
			fmt.Fprintf(&b, [...]string{"%%%02x", "%%%02X"}[rng.IntN(2)], c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// TestMatchAgainstNginx sends 600 paths built from dot segments,
// %-escapes and slashes (a third of them respellings of routed paths) to
// a real nginx whose locations mirror the routes,
// and wants, for each, the route rlproxy chooses (package reqview's view,
// then Match) to be the location nginx answered from, or both to refuse
// it with 400.
func TestMatchAgainstNginx(t *testing.T) {
	ng := nginxtest.Start(t, matchLocations)
	cfg, err := config.ParseWith("match.yaml", []byte(matchRoutes), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(cfg, Options{Store: memory.New(memory.Options{SweepInterval: -1})})
	if err != nil {
		t.Fatal(err)
	}
	differ, seen := 0, map[string]int{}
	for _, p := range matchPaths(600) {
		want := nginxLocation(t, ng.Addr, p)
		got := "400"
		r := &http.Request{Method: "GET", RequestURI: p, Host: "h", Header: http.Header{}}
		if v, reason := reqview.Read(r); reason == reqview.OK {
			got = l.Match(&v).Name
		}
		seen[want]++
		if got != want {
			differ++
			t.Errorf("%q: rlproxy %s, nginx %s", p, got, want)
		}
	}
	if differ > 0 {
		t.Logf("%d of 600 paths differ", differ)
	}
	// The paths exercise every route and the refusals, not one of them.
	for _, name := range []string{"login", "admin-x", "admin", "dots", "a", "all", "400"} {
		if seen[name] < 5 {
			t.Errorf("nginx answered %d paths from %s, want ≥ 5 (outcomes %v)", seen[name], name, seen)
		}
	}
	t.Logf("outcomes: %v", seen)
}

// nginxLocation sends GET path to nginx at addr and returns the location
// that answered (its body), or "400".
func nginxLocation(t *testing.T, addr, path string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%q: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		return string(body)
	case http.StatusBadRequest:
		return "400"
	}
	t.Fatalf("%q: nginx answered %d", path, resp.StatusCode)
	return ""
}
