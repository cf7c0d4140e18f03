package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"rlproxy/internal/admin"
	"rlproxy/internal/live"
	"rlproxy/internal/testutil/rlproxytest"
)

// adminPageCfg is one limited route; the admin section is appended.
const adminPageCfg = `upstreams: { app: { url: %q } }
policies:
  per_ip: { algorithm: token_bucket, rate: 1r/m, burst: 2, key: ip }
  per_key: { algorithm: sliding_log, limit: 100, window: 1h, key: header:X-API-Key }
routes:
  - { name: api, upstream: app, policies: [per_ip, per_key] }
`

// adminGet GETs path on the admin listener, with basic auth when user is set.
func adminGet(t *testing.T, in *rlproxytest.Instance, path, user, pass string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, in.AdminURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestAdminPageAccess: the page and its JSON are served on a loopback
// admin_listen, refused (403) on any other address without
// admin.basic_auth, and behind Basic authentication with it; /metrics,
// /healthz and /readyz answer without credentials in every case. Every
// page response carries the strict CSP.
func TestAdminPageAccess(t *testing.T) {
	up := rlproxytest.NewUpstream(t)
	probesOpen := func(t *testing.T, in *rlproxytest.Instance) {
		t.Helper()
		for _, p := range []string{"/metrics", "/healthz", "/readyz"} {
			if resp, _ := adminGet(t, in, p, "", ""); resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s: %d; want 200 without credentials", p, resp.StatusCode)
			}
		}
	}
	pageParts := []string{"/", "/api/stats", "/static/app.js", "/static/style.css"}

	t.Run("loopback", func(t *testing.T) {
		in := rlproxytest.Start(t, storeYAML(t, "memory")+strings.Replace(adminPageCfg, "%q", `"`+up.URL+`"`, 1))
		for _, p := range pageParts {
			resp, _ := adminGet(t, in, p, "", "")
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Security-Policy") != admin.CSP ||
				resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("GET %s: %d, CSP %q, nosniff %q; want 200 with the strict CSP", p, resp.StatusCode,
					resp.Header.Get("Content-Security-Policy"), resp.Header.Get("X-Content-Type-Options"))
			}
		}
		if resp, _ := adminGet(t, in, "/static/page.html", "", ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET /static/page.html: %d; want 404 (only the script and the style are served)", resp.StatusCode)
		}
		if !strings.Contains(admin.CSP, "script-src 'self'") || strings.Contains(admin.CSP, "unsafe-inline") {
			t.Errorf("CSP %q: want script-src 'self' and no unsafe-inline", admin.CSP)
		}
		probesOpen(t, in)
	})
	t.Run("public address without basic auth", func(t *testing.T) {
		in := rlproxytest.Start(t, "admin_listen: \"0.0.0.0:0\"\n"+storeYAML(t, "memory")+strings.Replace(adminPageCfg, "%q", `"`+up.URL+`"`, 1))
		for _, p := range pageParts {
			if resp, body := adminGet(t, in, p, "", ""); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "admin.basic_auth") {
				t.Errorf("GET %s: %d %q; want 403 naming admin.basic_auth", p, resp.StatusCode, body)
			}
		}
		probesOpen(t, in)
	})
	t.Run("basic auth", func(t *testing.T) {
		t.Setenv("RLPROXY_TEST_ADMIN_PASSWORD", "s3cret-admin-pass")
		in := rlproxytest.Start(t, "admin_listen: \"0.0.0.0:0\"\n"+storeYAML(t, "memory")+strings.Replace(adminPageCfg, "%q", `"`+up.URL+`"`, 1)+
			"admin: { basic_auth: { user: ops, password_env: RLPROXY_TEST_ADMIN_PASSWORD } }\n")
		for _, c := range []struct{ user, pass string }{{"", ""}, {"ops", "wrong"}, {"root", "s3cret-admin-pass"}} {
			resp, _ := adminGet(t, in, "/", c.user, c.pass)
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic realm=") ||
				resp.Header.Get("Content-Security-Policy") != admin.CSP {
				t.Errorf("GET / as %q/%q: %d, WWW-Authenticate %q; want 401 with a Basic challenge and the CSP", c.user, c.pass,
					resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
		}
		for _, p := range pageParts {
			if resp, _ := adminGet(t, in, p, "ops", "s3cret-admin-pass"); resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s as ops: %d; want 200", p, resp.StatusCode)
			}
		}
		probesOpen(t, in)
	})
}

// TestAdminPageEscapes: client values reach the page only escaped — a key
// containing <script> in the quota lookup is echoed as text — and client
// addresses are hashed by default, the same hash in the top refused list
// and in the quota lookup.
func TestAdminPageEscapes(t *testing.T) {
	up := rlproxytest.NewUpstream(t)
	in := rlproxytest.Start(t, storeYAML(t, "memory")+strings.Replace(adminPageCfg, "%q", `"`+up.URL+`"`, 1))
	c := rlproxytest.ClientFrom("127.0.0.9")
	for range 4 { // burst 2: two refusals
		rlproxytest.Get(t, c, in.URL+"/", "X-API-Key", "<script>alert(1)</script>")
	}
	const evil = `<script>alert(1)</script>`
	resp, body := adminGet(t, in, "/?route=api&key="+strings.ReplaceAll(evil, "<", "%3C")+"&ip=127.0.0.9", "", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("lookup: %d", resp.StatusCode)
	}
	if strings.Contains(body, evil) || strings.Count(body, "<script") != 1 || !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the key is not (only) escaped in the page:\n%s", body)
	}
	// The credential's quota: 4 requests, the 2 refused by per_ip not
	// charged to per_key (docs/CONTRACT.md: a refused request is charged by none).
	if !strings.Contains(body, `<tr data-policy="per_key"><td>per_key</td>`) || !strings.Contains(body, `<td class="remaining">98</td>`) {
		t.Errorf("lookup: want per_key with 98 remaining:\n%s", body)
	}
	_, js := adminGet(t, in, "/api/stats", "", "")
	if strings.Contains(js, "127.0.0.9") {
		t.Errorf("/api/stats names the client address with show_client_ips off: %s", js)
	}
	var snap live.Snapshot
	if err := json.Unmarshal([]byte(js), &snap); err != nil || len(snap.Top) != 1 || len(snap.Top[0].Clients) != 1 {
		t.Fatalf("stats %s (%v); want one policy with one refused client", js, err)
	}
	hashed := snap.Top[0].Clients[0].ID
	if !strings.HasPrefix(hashed, "ip#") || !strings.Contains(body, `<td class="client">`+hashed+`</td>`) {
		t.Errorf("top client %q: want an ip# hash, the same as the lookup of 127.0.0.9 shows:\n%s", hashed, body)
	}
}

// TestAdminPageShowsReloadError: a refused reload is on the page with its
// FILE:LINE: field: message, and the running configuration is still listed;
// once the file is restored to the running configuration, the page reads
// ok again (no stale refusal).
func TestAdminPageShowsReloadError(t *testing.T) {
	up := rlproxytest.NewUpstream(t)
	in := rlproxytest.Start(t, storeYAML(t, "memory")+strings.Replace(adminPageCfg, "%q", `"`+up.URL+`"`, 1))
	orig, err := os.ReadFile(in.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	_, body := adminGet(t, in, "/", "", "")
	if !strings.Contains(body, `<span class="good">ok</span>`) {
		t.Fatalf("a fresh start does not read ok:\n%s", body)
	}
	bad := strings.Replace(adminPageCfg, "burst: 2", "burst: -2", 1)
	in.Rewrite(t, "admin_listen: \"127.0.0.1:0\"\nlisten: \"127.0.0.1:0\"\n"+storeYAML(t, "memory")+strings.Replace(bad, "%q", `"`+up.URL+`"`, 1))
	in.App.Reload("test")
	_, body = adminGet(t, in, "/", "", "")
	want := in.ConfigPath + ":6: policies.per_ip.burst: -2: want a whole number from 1 to 1000000"
	if !strings.Contains(body, `<strong class="bad">refused</strong>`) || !strings.Contains(body, want) {
		t.Errorf("page after a refused reload: want %q in:\n%s", want, body)
	}
	if !strings.Contains(body, `<td class="limits">token bucket 1 r/m (burst 2)</td>`) {
		t.Errorf("the running configuration's limits are gone from the page:\n%s", body)
	}
	in.Rewrite(t, string(orig))
	in.App.Reload("test")
	if _, body = adminGet(t, in, "/", "", ""); !strings.Contains(body, `<span class="good">ok</span>`) || strings.Contains(body, `<strong class="bad">refused</strong>`) {
		t.Errorf("page after the file was restored: want ok, no refusal:\n%s", body)
	}
}

// TestAdminPageOverviewValkey: on the Valkey store the overview names it,
// its health and the circuit breaker's state.
func TestAdminPageOverviewValkey(t *testing.T) {
	up := rlproxytest.NewUpstream(t)
	in := rlproxytest.Start(t, storeYAML(t, "valkey")+strings.Replace(adminPageCfg, "%q", `"`+up.URL+`"`, 1))
	rlproxytest.Get(t, nil, in.URL+"/") // one round trip sets rlproxy_store_up
	_, body := adminGet(t, in, "/", "", "")
	for _, want := range []string{`<dd id="store">valkey · <span class="good">up</span></dd>`, `<dd id="breaker">closed</dd>`} {
		if !strings.Contains(body, want) {
			t.Errorf("overview on valkey: want %s in:\n%s", want, body)
		}
	}
}
