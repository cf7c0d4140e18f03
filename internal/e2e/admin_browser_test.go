package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// adminBrowserCfg: three routes; the attacked one (login) allows 20 r/s
// per IP. Client IPs are shown so the test can name the attacker.
const adminBrowserCfg = `upstreams: { app: { url: %q } }
admin: { show_client_ips: true }
policies:
  login_ip: { algorithm: token_bucket, rate: 20r/s, burst: 20, key: ip }
  api_ip: { algorithm: token_bucket, rate: 50r/s, burst: 100, key: ip }
  api_key: { algorithm: sliding_log, limit: 1000, window: 1h, key: header:X-API-Key }
  web_ip: { algorithm: leaky_bucket, rate: 100r/s, burst: 200, key: ip, on_store_error: deny }
routes:
  - { name: login, upstream: app, policies: [login_ip], match: { path_prefix: /login } }
  - { name: api, upstream: app, policies: [api_ip, api_key], match: { path_prefix: /api } }
  - { name: web, upstream: app, policies: [web_ip] }
`

// adminChromium returns the browser binary, or skips the test (fails it with
// RLPROXY_REQUIRE_TOOLS=1, as scripts/test.sh sets).
func adminChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("RLPROXY_REQUIRE_TOOLS") == "1" {
		t.Fatal("chromium not installed (RLPROXY_REQUIRE_TOOLS=1): apt-get install chromium")
	}
	t.Skip("chromium not installed")
	return ""
}

// adminBrowser starts a headless Chromium and returns a tab's context.
func adminBrowser(t *testing.T) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(adminChromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.WindowSize(1200, 1700),
		chromedp.UserDataDir(t.TempDir()))
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancelT)
	return ctx
}

// adminTraffic is the test's traffic script: one attacker on /login at
// 200 r/s, and 20 normal clients at 4 r/s each alternating /api (with
// their API key) and /, two of which also burst 30 requests on /login.
type adminTraffic struct {
	started   time.Time // when the attacker's first request was due
	mu        sync.Mutex
	refusedAt []time.Time // the attacker's 429s

	apiOK  [20]atomic.Int64 // /api requests answered 200, per normal client
	stopN  atomic.Bool      // normal clients stop after their current request
	stopA  atomic.Bool
	wgN    sync.WaitGroup
	wgA    sync.WaitGroup
	failed atomic.Int64 // transport errors
}

func (tr *adminTraffic) start(base string) {
	const workers, rate = 4, 200
	start := time.Now()
	tr.started = start
	for g := range workers {
		tr.wgA.Add(1)
		go func() {
			defer tr.wgA.Done()
			c := rlproxytest.ClientFrom("127.0.0.2")
			for k := 0; !tr.stopA.Load(); k++ {
				time.Sleep(time.Until(start.Add(time.Duration(k*workers+g) * time.Second / rate)))
				if code := tr.get(c, base+"/login", ""); code == http.StatusTooManyRequests {
					tr.mu.Lock()
					tr.refusedAt = append(tr.refusedAt, time.Now())
					tr.mu.Unlock()
				}
			}
		}()
	}
	for i := range 20 {
		tr.wgN.Add(1)
		go func() {
			defer tr.wgN.Done()
			c := rlproxytest.ClientFrom(fmt.Sprintf("127.0.0.%d", 10+i))
			key := fmt.Sprintf("key-%02d", i)
			if i < 2 {
				for range 30 {
					tr.get(c, base+"/login", "")
				}
			}
			for k := 0; !tr.stopN.Load(); k++ {
				time.Sleep(250 * time.Millisecond)
				if k%2 == 1 {
					tr.get(c, base+"/", "")
				} else if tr.get(c, base+"/api/items", key) == http.StatusOK {
					tr.apiOK[i].Add(1)
				}
			}
		}()
	}
}

func (tr *adminTraffic) get(c *http.Client, url, key string) int {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		tr.failed.Add(1)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// refusedRate is the attacker's 429s per second between from and to.
func (tr *adminTraffic) refusedRate(from, to time.Time) float64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, at := range tr.refusedAt {
		if at.After(from) && !at.After(to) {
			n++
		}
	}
	return float64(n) / to.Sub(from).Seconds()
}

// TestAdminPageInBrowser loads the admin page in headless Chromium against
// a running rlproxy under the traffic script and checks the rendered DOM:
// every route with its limits, the attacked route's refused-per-second
// figure within 20 % of the script's, the attacker first in the top
// refused list, and the quota lookup of a normal client's API key showing
// exactly what it has left. It saves a screenshot (RLPROXY_SCREENSHOT=FILE
// copies it, e.g. to docs/admin-page.png).
func TestAdminPageInBrowser(t *testing.T) {
	ctx := adminBrowser(t)
	up := rlproxytest.NewUpstream(t)
	in := rlproxytest.Start(t, storeYAML(t, "memory")+fmt.Sprintf(adminBrowserCfg, up.URL))
	tr := &adminTraffic{}
	tr.start(in.URL)
	t.Cleanup(func() { tr.stopN.Store(true); tr.stopA.Store(true); tr.wgN.Wait(); tr.wgA.Wait() })

	if err := chromedp.Do(ctx, chromedp.Navigate(in.AdminURL+"/"), chromedp.WaitVisible(chromedp.CSS("#routes"))); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	adminCheckLimits(t, ctx)

	// Read the live figures once the span the page averages (its
	// data-rate-from) begins a second into the traffic, past the login
	// burst's 20 tokens: every second it averages is steady traffic.
	steady := tr.started.Add(time.Second).UnixMilli()
	waitfor.True(t, "the page averaging steady traffic only", func() bool {
		from, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('article.route[data-route="login"]').dataset.rateFrom || ""`))
		ms, perr := strconv.ParseInt(from, 10, 64)
		return err == nil && perr == nil && ms >= steady
	})
	from, to, refused, first, count := adminLiveFigures(t, ctx)
	script := tr.refusedRate(from, to)
	page, _ := strconv.ParseFloat(refused, 64)
	t.Logf("login refused/s: page %s, script %.1f; top refused %s (%s)", refused, script, first, count)
	if script < 50 || math.Abs(page-script) > 0.2*script {
		t.Errorf("login refused/s on the page %q; want within 20%% of the script's %.1f (attacker at 200 r/s, 20 r/s allowed)", refused, script)
	}
	if first != "ip:127.0.0.2" {
		t.Errorf("first of the top refused list %q; want the attacker ip:127.0.0.2", first)
	}

	// Normal clients stop (their counts are final), the attacker goes on.
	tr.stopN.Store(true)
	tr.wgN.Wait()
	want := 1000 - tr.apiOK[5].Load()
	if remaining := adminLookup(t, ctx, "api", "key-05", "api_key"); remaining != strconv.FormatInt(want, 10) {
		t.Errorf("quota lookup of key-05 on api shows %q remaining on api_key; want exactly %d (1000 − %d requests)", remaining, want, 1000-want)
	}
	adminNextPoll(t, ctx) // the charts drawn after the normal clients stopped
	adminScreenshot(t, ctx)
	if n := tr.failed.Load(); n > 0 {
		t.Errorf("%d requests of the traffic script failed in transport", n)
	}
	if scripts, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.scripts.length`)); err != nil || scripts != 1 {
		t.Errorf("%d script elements in the page (%v); want only /static/app.js", scripts, err)
	}
	adminCheckEscapes(t, ctx, in.AdminURL)
}

// adminCheckEscapes looks up a key that is a script: the browser must
// show it as text (in the form and the answer) and run nothing of it.
func adminCheckEscapes(t *testing.T, ctx context.Context, adminURL string) {
	t.Helper()
	const evil = `<script>window.pwned=1</script><img src=x onerror="window.pwned=2">`
	u := adminURL + "/?route=api&key=" + url.QueryEscape(evil)
	if err := chromedp.Do(ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS(`#quota-result`))); err != nil {
		t.Fatal(err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[String(window.pwned), String(document.scripts.length),
		String(document.images.length), document.querySelector('input[name="key"]').value,
		document.querySelector('#quota-result code.asked').textContent]`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"undefined", "1", "0", evil, evil}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("page for a key holding markup: window.pwned, scripts, images, input, echo = %q; want %q", got, want)
	}
}

// adminCheckLimits checks each route's policies' limits as the page lists them.
func adminCheckLimits(t *testing.T, ctx context.Context) {
	t.Helper()
	wantLimits := map[string][]string{
		"login": {"token bucket 20 r/s (burst 20)"},
		"api":   {"token bucket 50 r/s (burst 100)", "sliding log 1000 per 1h"},
		"web":   {"leaky bucket 100 r/s (burst 200)"},
	}
	for route, want := range wantLimits {
		sel := fmt.Sprintf(`article.route[data-route=%q] td.limits`, route)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf(`[...document.querySelectorAll(%q)].map(e => e.textContent)`, sel)))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("route %s lists limits %q; want %q", route, got, want)
		}
	}
}

// adminLiveFigures waits for the page's script to draw its next poll, then
// reads what it drew: the span the login route's refused per second
// averages (its data-rate-from/-to), that figure, and the first client of
// login_ip's top refused list with its count.
func adminLiveFigures(t *testing.T, ctx context.Context) (from, to time.Time, refused, first, count string) {
	t.Helper()
	adminNextPoll(t, ctx)
	// One script: the reads see the same poll (it redraws at once).
	figures, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[
		document.querySelector('article.route[data-route="login"]').dataset.rateFrom,
		document.querySelector('article.route[data-route="login"]').dataset.rateTo,
		document.querySelector('article.route[data-route="login"] .rate-refused').textContent,
		document.querySelector('#top-lists table.top[data-policy="login_ip"] tbody tr td.client').textContent,
		document.querySelector('#top-lists table.top[data-policy="login_ip"] tbody tr td.count').textContent]`))
	if err != nil {
		t.Fatal(err)
	}
	fromMs, _ := strconv.ParseInt(figures[0], 10, 64)
	toMs, _ := strconv.ParseInt(figures[1], 10, 64)
	if toMs-fromMs < 4000 {
		t.Fatalf("the page averages %v..%v; want about 5 s", figures[0], figures[1])
	}
	return time.UnixMilli(fromMs), time.UnixMilli(toMs), figures[2], figures[3], figures[4]
}

// adminNextPoll waits until the page has drawn its next poll of
// /api/stats (body's data-updated changed).
func adminNextPoll(t *testing.T, ctx context.Context) {
	t.Helper()
	body := chromedp.CSS("body")
	prev, err := chromedp.Run(ctx, chromedp.AttributeValue(body, "data-updated"))
	if err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, "the page's next poll", func() bool {
		a, err := chromedp.Run(ctx, chromedp.AttributeValue(body, "data-updated"))
		return err == nil && a.Exists && a.Value != prev.Value
	})
}

// adminLookup submits the quota lookup form and returns the remaining
// count it shows for policy.
func adminLookup(t *testing.T, ctx context.Context, route, key, policy string) string {
	t.Helper()
	err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`select[name="route"]`), route),
		chromedp.SetValue(chromedp.CSS(`input[name="key"]`), key),
		chromedp.Click(chromedp.CSS(`#lookup button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#quota-result`)))
	if err != nil {
		t.Fatal(err)
	}
	remaining, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(fmt.Sprintf(`#quota-result tr[data-policy=%q] td.remaining`, policy))))
	if err != nil {
		t.Fatal(err)
	}
	return remaining
}

// adminScreenshot writes the whole page as admin-page.png in the test's
// artifact directory (go test -artifacts keeps it) and, when
// RLPROXY_SCREENSHOT names a file, there too.
func adminScreenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "admin-page.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	if dst := os.Getenv("RLPROXY_SCREENSHOT"); dst != "" {
		if err := os.WriteFile(dst, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
