package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"rlproxy/internal/control"
	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// adminEntriesCfg: one IP-keyed policy; the admin page needs basic_auth to
// end an entry (changes are never open).
const adminEntriesCfg = `upstreams: { app: { url: %q } }
admin: { basic_auth: { user: ops, password_env: RLPROXY_E2E_ADMIN_PW } }
policies:
  api: { algorithm: token_bucket, rate: 100r/s, burst: 100, key: ip }
routes: [ { name: all, upstream: app, policies: [api] } ]
`

// TestAdminPageEndsEntry: a ban set through the control API refuses its
// client; the admin page, in headless Chromium, lists it by hashed id and
// its End button deletes it (a same-origin JSON DELETE with the browser's
// basic credentials), after which the client is served again. Without
// admin.audit_log the change is audited in the process log, naming the
// user and never the address.
func TestAdminPageEndsEntry(t *testing.T) {
	ctx := adminBrowser(t)
	const pw = "correct horse battery"
	t.Setenv("RLPROXY_E2E_ADMIN_PW", pw)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:"+pw))
	up := rlproxytest.NewUpstream(t)
	var log netutil.LockedBuffer
	in := rlproxytest.Start(t, storeYAML(t, "memory")+fmt.Sprintf(adminEntriesCfg, up.URL), rlproxytest.WithLog(&log))
	banned := rlproxytest.ClientFrom("127.0.0.5")

	req, _ := http.NewRequest(http.MethodPost, in.AdminURL+"/api/entries",
		strings.NewReader(`{"policy":"api","source":"ip","key":"127.0.0.5","action":"ban","expires_in":"1h","reason":"e2e scraping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var e control.Entry
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/entries: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if r, _ := rlproxytest.Get(t, banned, in.URL+"/"); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("banned client: %d, want 429", r.StatusCode)
	}

	row := fmt.Sprintf(`#entries-table tr[data-id=%q]`, e.ID)
	err = chromedp.Do(ctx,
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
				return err
			}
			_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}})
			return err
		}),
		chromedp.Navigate(in.AdminURL+"/"), chromedp.WaitVisible(chromedp.CSS(row)))
	if err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	client, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(row+" td.client")))
	if err != nil || client != e.Client || !strings.HasPrefix(client, "ip#") {
		t.Errorf("the page shows client %q (%v), want the entry's hashed id %q", client, err, e.Client)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(row+" button.end")), chromedp.WaitNotPresent(chromedp.CSS(row))); err != nil {
		t.Fatalf("ending the entry: %v", err)
	}
	note, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#entries-note")))
	status, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#entries-status")))
	if note != "Ended "+e.ID+"." || status != "No entries." {
		t.Errorf("note %q, status %q; want %q, %q", note, status, "Ended "+e.ID+".", "No entries.")
	}
	if r, _ := rlproxytest.Get(t, banned, in.URL+"/"); r.StatusCode != http.StatusOK {
		t.Errorf("client after its ban ended: %d, want 200", r.StatusCode)
	}
	waitfor.True(t, "two audit lines in the process log", func() bool { return strings.Count(log.String(), "control change") == 2 })
	if out := log.String(); strings.Count(out, `\"who\":\"ops\"`)+strings.Count(out, `"who":"ops"`) != 2 || strings.Contains(out, "127.0.0.5") {
		t.Errorf("process log: want two audit lines by ops, never the address:\n%s", out)
	}
}
