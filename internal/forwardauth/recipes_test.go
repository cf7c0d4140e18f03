package forwardauth_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/nginxtest"
	"rlproxy/internal/testutil/rlproxytest"
)

// recipeDoc is the operator's reference page holding the recipes.
const recipeDoc = "../../docs/reference/decision-interfaces.md"

// recipe returns recipeDoc's code block after "<!-- recipe:NAME -->",
// so that the tests run the recipe operators copy, verbatim.
func recipe(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(recipeDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- recipe:"+name+" -->\n```")
	if !ok {
		t.Fatalf("%s has no <!-- recipe:%s --> block", recipeDoc, name)
	}
	_, rest, _ = strings.Cut(rest, "\n") // the fence's info string
	block, _, ok := strings.Cut(rest, "\n```")
	if !ok {
		t.Fatalf("%s recipe %s: unterminated code block", recipeDoc, name)
	}
	return block + "\n"
}

// recipeConfig is the rlproxy side of the recipes: 5 requests per minute
// per client address (a token bucket: the 6th is refused, the next token
// 12 s away).
const recipeConfig = `
forward_auth: {listen: "127.0.0.1:0", refused_status: %d}
real_ip: {trusted_proxies: [127.0.0.1/32]}
upstreams: {app: {builtin: echo}}
policies:
  api: {algorithm: token_bucket, rate: 5r/m, burst: 5}
routes:
  - {name: api, upstream: app, policies: [api]}
`

// checkFiveThenRefused sends 6 requests through front (each with another
// spoofed X-Forwarded-For) and checks 5 reached up, then a 429 with
// Retry-After and the RateLimit fields at the client.
func checkFiveThenRefused(t *testing.T, front string, up *rlproxytest.Upstream) {
	t.Helper()
	for i := 1; i <= 6; i++ {
		resp, body := rlproxytest.Get(t, nil, front+"/api/items?page=1", "X-Forwarded-For", fmt.Sprintf("10.9.9.%d", i))
		if i <= 5 {
			if resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("request %d: %d %q, want the upstream's 200", i, resp.StatusCode, body)
			}
			continue
		}
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("request 6: %d %q, want 429", resp.StatusCode, body)
		}
		if ra := resp.Header.Get("Retry-After"); ra != "12" {
			t.Errorf("Retry-After %q, want 12", ra)
		}
		if p := resp.Header.Get("RateLimit-Policy"); p != `"api";q=5;w=60` {
			t.Errorf("RateLimit-Policy %q", p)
		}
		if r := resp.Header.Get("RateLimit"); !strings.HasPrefix(r, `"api";r=0;t=`) {
			t.Errorf("RateLimit %q", r)
		}
		if !strings.Contains(body, "urn:rlproxy:problem:rate-limited") {
			t.Errorf("body %q", body)
		}
	}
	if n := up.Count(); n != 5 {
		t.Fatalf("the upstream was reached %d times, want 5", n)
	}
	if got := up.Requests()[0].URL.String(); got != "/api/items?page=1" {
		t.Errorf("upstream saw %q", got)
	}
}

// TestNginxRecipe runs the reference's nginx recipe (auth_request, 403 →
// @ratelimited 429) in front of a recording upstream.
func TestNginxRecipe(t *testing.T) {
	in, _ := start(t, fmt.Sprintf(recipeConfig, 403))
	up := rlproxytest.NewUpstream(t)
	upHost := strings.TrimPrefix(up.URL, "http://")
	conf := strings.NewReplacer("listen 80;", "listen "+nginxtest.Listen+";",
		"127.0.0.1:8082", in.App.ForwardAuthAddr(), "127.0.0.1:3000", upHost).Replace(recipe(t, "nginx"))
	ng := nginxtest.Start(t, conf)
	checkFiveThenRefused(t, ng.URL, up)
	// The spoofed addresses were never believed: one client, 127.0.0.1.
	if n := requests(t, in.Metrics(t), "api", "api", "allowed"); n != 5 {
		t.Fatalf("allowed = %v, want 5", n)
	}
	// An allowed answer carries the copied headers too.
	resp, _ := rlproxytest.Get(t, rlproxytest.ClientFrom("127.0.0.3"), ng.URL+"/")
	if resp.StatusCode != 200 || resp.Header.Get("RateLimit") != `"api";r=4;t=12` {
		t.Fatalf("another client through nginx: %d RateLimit %q", resp.StatusCode, resp.Header.Get("RateLimit"))
	}
}

// TestCaddyRecipe runs the reference's Caddy recipe (forward_auth).
func TestCaddyRecipe(t *testing.T) {
	bin, err := exec.LookPath("caddy")
	requireTool(t, "caddy", err)
	in, _ := start(t, fmt.Sprintf(recipeConfig, 429))
	up := rlproxytest.NewUpstream(t)
	addr := netutil.FreeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	site := strings.NewReplacer(":80 {", ":"+port+" {",
		"127.0.0.1:8082", in.App.ForwardAuthAddr(), "127.0.0.1:3000", strings.TrimPrefix(up.URL, "http://")).Replace(recipe(t, "caddy"))
	dir := t.TempDir()
	file := filepath.Join(dir, "Caddyfile")
	global := "{\n\tadmin off\n\tauto_https off\n\tdefault_bind 127.0.0.1\n}\n"
	if err := os.WriteFile(file, []byte(global+site), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", file, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	out := &netutil.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	proc, err := netutil.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.Kill()
		if t.Failed() {
			t.Logf("caddy output:\n%s", out.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := netutil.Poll(ctx, proc.Exited(), netutil.PollInterval, func() error { return netutil.Accepts(addr) }); err != nil {
		t.Fatalf("caddy did not start on %s: %v", addr, err)
	}
	front := (&url.URL{Scheme: "http", Host: addr}).String()
	checkFiveThenRefused(t, front, up)
	if n := requests(t, in.Metrics(t), "api", "api", "rejected"); n != 1 {
		t.Fatalf("rejected = %v, want 1", n)
	}
}
