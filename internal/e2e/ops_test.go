package e2e

// Operating rlproxy through a real instance: hot reload under load (with
// editors' rename-saves and invalid versions), state across reloads,
// Prometheus metrics and the admin endpoints, dry run, Kubernetes ConfigMap
// updates, TLS (listener and https upstream) and sampled refusal logs.

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// opsLogBuf collects the process log (one slog record per Write).
type opsLogBuf struct {
	netutil.LockedBuffer
}

// lines returns the log lines containing substr.
func (b *opsLogBuf) lines(substr string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// opsSample is one series of a Prometheus text scrape.
type opsSample struct {
	name   string
	labels map[string]string
	value  float64
}

// opsScrape GETs /metrics from the admin listener and parses it.
func opsScrape(t *testing.T, in *rlproxytest.Instance) (string, []opsSample) {
	t.Helper()
	resp, body := rlproxytest.Get(t, nil, in.AdminURL+"/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: status %d", resp.StatusCode)
	}
	return body, opsParse(t, body)
}

// opsParse reads the Prometheus text format (no escapes beyond \" \\ \n in
// label values, which is all client_golang writes).
func opsParse(t *testing.T, text string) []opsSample {
	t.Helper()
	var out []opsSample
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		s := opsSample{labels: map[string]string{}}
		i := strings.IndexAny(line, "{ ")
		if i < 0 {
			t.Fatalf("scrape line %q", line)
		}
		s.name = line[:i]
		rest := line[i:]
		if rest[0] == '{' {
			rest = rest[1:]
			for rest[0] != '}' {
				eq := strings.IndexByte(rest, '=')
				name := rest[:eq]
				rest = rest[eq+1:]
				// The quoted value ends at the first unescaped quote.
				j := 1
				for rest[j] != '"' {
					if rest[j] == '\\' {
						j++
					}
					j++
				}
				v, err := strconv.Unquote(rest[:j+1])
				if err != nil {
					t.Fatalf("scrape line %q: %v", line, err)
				}
				s.labels[name] = v
				rest = strings.TrimPrefix(rest[j+1:], ",")
			}
			rest = rest[1:]
		}
		f := strings.Fields(rest)
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			t.Fatalf("scrape line %q: %v", line, err)
		}
		s.value = v
		out = append(out, s)
	}
	return out
}

// opsValue is the value of the one series name{kv...} (kv: label, value
// pairs, all of the series' labels), failing when there is not exactly one.
func opsValue(t *testing.T, samples []opsSample, name string, kv ...string) float64 {
	t.Helper()
	var found []float64
	for _, s := range samples {
		if s.name != name || len(s.labels) != len(kv)/2 {
			continue
		}
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			ok = ok && s.labels[kv[i]] == kv[i+1]
		}
		if ok {
			found = append(found, s.value)
		}
	}
	if len(found) != 1 {
		t.Fatalf("series %s%q: found %d, want 1", name, kv, len(found))
	}
	return found[0]
}

// opsReloads returns rlproxy_config_reloads_total by result.
func opsReloads(t *testing.T, in *rlproxytest.Instance) (success, failure int) {
	t.Helper()
	_, s := opsScrape(t, in)
	return int(opsValue(t, s, "rlproxy_config_reloads_total", "result", "success")),
		int(opsValue(t, s, "rlproxy_config_reloads_total", "result", "failure"))
}

// opsRequests checks every rlproxy_requests_total series against want
// ("route/policy/decision" → count; absent = 0).
func opsRequests(t *testing.T, samples []opsSample, want map[string]int) {
	t.Helper()
	seen := map[string]bool{}
	for _, s := range samples {
		if s.name != "rlproxy_requests_total" {
			continue
		}
		k := s.labels["route"] + "/" + s.labels["policy"] + "/" + s.labels["decision"]
		seen[k] = true
		if int(s.value) != want[k] || float64(int(s.value)) != s.value {
			t.Errorf("rlproxy_requests_total %s = %v, want %d", k, s.value, want[k])
		}
	}
	for k := range want {
		if !seen[k] {
			t.Errorf("rlproxy_requests_total %s missing from the scrape", k)
		}
	}
}

// opsWriteFile replaces path's content, in place or — like editors and
// config management do — by writing a temporary file and renaming it over.
func opsWriteFile(t *testing.T, path string, data []byte, rename bool) {
	t.Helper()
	if !rename {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".swp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// opsMember returns the r= value of policy name's member of a RateLimit
// header (`"a";r=3;t=10, "b";r=7;t=10`), or -1 when absent.
func opsMember(h http.Header, name string) int {
	for _, m := range strings.Split(h.Get("RateLimit"), ", ") {
		if !strings.HasPrefix(m, `"`+name+`";`) {
			continue
		}
		for _, p := range strings.Split(m, ";") {
			if v, ok := strings.CutPrefix(p, "r="); ok {
				n, err := strconv.Atoi(v)
				if err == nil {
					return n
				}
			}
		}
	}
	return -1
}

// opsHammerYAML is the hammer test's config. Line numbers matter: the
// invalid versions replace one known line.
const opsHammerYAML = `listen: "127.0.0.1:0"
admin_listen: "127.0.0.1:0"
log: { level: debug }
server: { shutdown_timeout: 1s }
upstreams:
  app: { url: %q }
policies:
  tight: { algorithm: sliding_log, limit: 1, window: 1h, key: global }
  wide:
    algorithm: token_bucket
    rate: 1000000r/s
    burst: %d
    key: ip
routes:
  - name: hammer
    match: { path_prefix: /h/ }
    upstream: app
    policies: [wide]
  - name: deny
    match: { path_prefix: /d/ }
    upstream: app
    policies: [tight]
`

// opsMistakes are invalid versions of opsHammerYAML: the 1-based line
// replaced, its new text, and what the refusal must name.
var opsMistakes = []struct {
	line       int
	text, want string
}{
	{11, "    rate: 10/s", "rlproxy.yaml:11: policies.wide.rate: "},
	{12, "    burts: 5", "rlproxy.yaml:12: policies.wide.burts: unknown field"},
	{17, "    upstream: nowhere", "rlproxy.yaml:17: routes[0].upstream: unknown upstream"},
	{16, `    match: { path_regex: "(" }`, "rlproxy.yaml:16: routes[0].match.path_regex: "},
	{10, "    algorithm: leaky_buket", "rlproxy.yaml:10: policies.wide.algorithm: "},
}

// TestOpsReloadHammer reloads the config 20 times — valid and invalid
// versions alternating, every third one saved by rename — while 8
// keep-alive clients send requests without pause, and a ninth keeps
// hitting a route whose global limit of 1 per hour it spent at once (its
// refusals are logged while reloads swap the config). No request may fail;
// exactly one request of the ninth client passes (state survives reloads);
// every invalid version is refused naming its line; the reload counters
// are exact; rewriting identical content is not a reload.
func TestOpsReloadHammer(t *testing.T) {
	t.Parallel()
	up := rlproxytest.NewUpstream(t)
	version := func(burst int) string { return fmt.Sprintf(opsHammerYAML, up.URL, burst) }
	logs := &opsLogBuf{}
	in := rlproxytest.Start(t, version(1_000_000), rlproxytest.WithLog(logs))

	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		sent     atomic.Int64
		mu       sync.Mutex
		failures []string
	)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := rlproxytest.ClientFrom(fmt.Sprintf("127.0.0.%d", 20+i))
			defer c.CloseIdleConnections()
			for n := 0; !stop.Load() && n < 1_000_000; n++ {
				resp, err := c.Get(in.URL + "/h/item")
				sent.Add(1)
				if err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					continue
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("status %d, body error %v", resp.StatusCode, err))
					mu.Unlock()
				}
			}
		}()
	}

	var denyOK, denyRefused atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := rlproxytest.ClientFrom("127.0.0.30")
		defer c.CloseIdleConnections()
		for n := 0; !stop.Load() && n < 1_000_000; n++ {
			resp, err := c.Get(in.URL + "/d/item")
			if err != nil {
				mu.Lock()
				failures = append(failures, err.Error())
				mu.Unlock()
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				denyOK.Add(1)
			case http.StatusTooManyRequests:
				denyRefused.Add(1)
			default:
				mu.Lock()
				failures = append(failures, fmt.Sprintf("/d/: status %d", resp.StatusCode))
				mu.Unlock()
			}
		}
	}()

	var wantRefusals []string
	lastValid := ""
	for v := range 20 {
		var data string
		if v%2 == 0 {
			data = version(1_000_000 - v/2 - 1) // differs from every earlier version
			lastValid = data
		} else {
			m := opsMistakes[(v/2)%len(opsMistakes)]
			lines := strings.Split(version(1_000_000), "\n")
			lines[m.line-1] = m.text
			data = strings.Join(lines, "\n")
			wantRefusals = append(wantRefusals, m.want)
		}
		before := sent.Load()
		opsWriteFile(t, in.ConfigPath, []byte(data), v%3 == 0)
		want := v + 1
		waitfor.True(t, fmt.Sprintf("version %d to be reloaded", v), func() bool {
			s, f := opsReloads(t, in)
			return s+f >= want
		})
		// Keep the reloads inside the traffic: some requests per version.
		waitfor.True(t, "the clients to send 16 more requests", func() bool { return sent.Load() >= before+16 })
	}

	// Identical content (the running version, saved again) is not a reload.
	unchanged := len(logs.lines("config unchanged; not reloading"))
	opsWriteFile(t, in.ConfigPath, []byte(lastValid), true)
	waitfor.True(t, "the identical rewrite to be seen", func() bool {
		return len(logs.lines("config unchanged; not reloading")) > unchanged
	})
	stop.Store(true)
	wg.Wait()

	succ, fail := opsReloads(t, in)
	if succ != 10 || fail != 10 {
		t.Errorf("rlproxy_config_reloads_total success=%d failure=%d, want 10 and 10", succ, fail)
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed during reloads, first: %s", len(failures), sent.Load(), failures[0])
	}
	refused := logs.lines("config reload refused")
	if len(refused) != len(wantRefusals) {
		t.Fatalf("%d refusal log lines, want %d:\n%s", len(refused), len(wantRefusals), strings.Join(refused, "\n"))
	}
	for i, want := range wantRefusals {
		if !strings.Contains(refused[i], want) {
			t.Errorf("refusal %d: %q does not name %q", i, refused[i], want)
		}
	}
	if denyOK.Load() != 1 {
		t.Errorf("%d requests passed a limit of 1 per hour across reloads, want 1", denyOK.Load())
	}
	// Every request reached the upstream and was counted once.
	total := int(sent.Load())
	if up.Count() != total+1 {
		t.Errorf("upstream saw %d requests, clients sent %d (+1 on /d/)", up.Count(), total)
	}
	_, s := opsScrape(t, in)
	opsRequests(t, s, map[string]int{
		"hammer/wide/allowed": total,
		"deny/tight/allowed":  1, "deny/tight/rejected": int(denyRefused.Load()),
	})
	// The last valid version is the one served (burst 999990).
	resp, _ := rlproxytest.Get(t, nil, in.URL+"/h/x")
	if got := resp.Header.Get("RateLimit-Policy"); got != `"wide";q=999990;w=1` {
		t.Errorf("RateLimit-Policy %q, want the last valid version's q=999990", got)
	}
	t.Logf("%d requests (+%d refused) over 20 reloads, none failed", total, denyRefused.Load())
}

// TestOpsReloadKeepsState: raising policy a's limit admits at once and
// leaves policy b's state alone; changing a's algorithm starts a afresh.
func TestOpsReloadKeepsState(t *testing.T) {
	t.Parallel()
	up := rlproxytest.NewUpstream(t)
	cfg := func(a string) string {
		return fmt.Sprintf(`upstreams: { app: { url: %q } }
policies:
  a: %s
  b: { algorithm: sliding_log, limit: 10, window: 1h }
routes:
  - { name: r, match: { path: /r }, upstream: app, policies: [a, b] }
`, up.URL, a)
	}
	in := rlproxytest.Start(t, cfg("{ algorithm: sliding_log, limit: 3, window: 1h }"))
	get := func(wantStatus, wantA, wantB int) {
		t.Helper()
		resp, _ := rlproxytest.Get(t, nil, in.URL+"/r")
		if resp.StatusCode != wantStatus || opsMember(resp.Header, "a") != wantA || opsMember(resp.Header, "b") != wantB {
			t.Fatalf("status %d RateLimit %q, want %d with a r=%d, b r=%d", resp.StatusCode, resp.Header.Get("RateLimit"), wantStatus, wantA, wantB)
		}
	}
	reload := func(a string) {
		t.Helper()
		succ, _ := opsReloads(t, in)
		in.Rewrite(t, cfg(a))
		in.App.Reload("test")
		if s, f := opsReloads(t, in); s != succ+1 || f != 0 {
			t.Fatalf("reloads success=%d failure=%d after a valid change, want %d and 0", s, f, succ+1)
		}
	}
	get(200, 2, 9)
	get(200, 1, 8)
	get(200, 0, 7)
	get(429, 0, 7) // a refuses; b is not charged

	reload("{ algorithm: sliding_log, limit: 5, window: 1h }")
	get(200, 1, 6) // a's 3 entries count against 5; b kept its 3
	get(200, 0, 5)
	get(429, 0, 5)

	reload("{ algorithm: token_bucket, rate: 1r/h, burst: 5 }")
	get(200, 4, 4) // a is a new, full bucket; b still counts
	if up.Count() != 6 {
		t.Errorf("upstream saw %d, want 6", up.Count())
	}
}

// TestOpsMetrics sends known traffic and checks every
// rlproxy_requests_total series, promtool's lint, the probes, and that no
// series carries a client address or credential.
func TestOpsMetrics(t *testing.T) {
	t.Parallel()
	up := rlproxytest.NewUpstream(t)
	in := rlproxytest.Start(t, fmt.Sprintf(`upstreams: { app: { url: %q } }
policies:
  a: { algorithm: sliding_log, limit: 10, window: 1h }
  b: { algorithm: sliding_log, limit: 100, window: 1h }
  shape: { algorithm: leaky_bucket, rate: 5r/s, burst: 5 }
  keyed: { algorithm: sliding_log, limit: 100, window: 1h, key: header:X-API-Key }
routes:
  - { name: two, match: { path: /two }, upstream: app, policies: [a, b] }
  - { name: shaped, match: { path: /shaped }, upstream: app, policies: [shape] }
  - { name: keyed, match: { path: /keyed }, upstream: app, policies: [keyed] }
`, up.URL))
	var codes []int
	for range 15 {
		resp, _ := rlproxytest.Get(t, nil, in.URL+"/two")
		codes = append(codes, resp.StatusCode)
	}
	if fmt.Sprint(codes) != "[200 200 200 200 200 200 200 200 200 200 429 429 429 429 429]" {
		t.Fatalf("statuses %v, want 10×200 then 5×429", codes)
	}
	// Three at once into a 5 r/s leaky bucket in delay mode: the first
	// passes, the others wait their turn (~200 ms and ~400 ms).
	var wg sync.WaitGroup
	c := rlproxytest.ClientFrom("127.0.0.9")
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Get(in.URL + "/shaped")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("/shaped status %d", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	const secret = "sk-live-ops-7f3a9c"
	for range 2 {
		rlproxytest.Get(t, nil, in.URL+"/keyed", "X-API-Key", secret)
	}

	text, s := opsScrape(t, in)
	opsRequests(t, s, map[string]int{
		"two/a/allowed": 10, "two/a/rejected": 5,
		"two/b/allowed": 10, "two/b/not_charged": 5,
		"shaped/shape/allowed": 1, "shaped/shape/delayed": 2,
		"keyed/keyed/allowed": 2,
	})
	if got := opsValue(t, s, "rlproxy_delay_seconds_count"); got != 2 {
		t.Errorf("rlproxy_delay_seconds_count = %v, want 2", got)
	}
	if got := opsValue(t, s, "rlproxy_waiting_requests"); got != 0 {
		t.Errorf("rlproxy_waiting_requests = %v, want 0", got)
	}
	// No per-client series: only these labels, no address, no credential
	// (the server label is a configured upstream address, dropped below).
	allowed := map[string]bool{"route": true, "policy": true, "decision": true, "result": true, "version": true, "goversion": true, "le": true,
		"code": true, "upstream": true, "server": true, "op": true, "listener": true, "reason": true,
		"action": true} // rlproxy_control_changes_total: ban, exempt, override, delete
	for _, smp := range s {
		if !strings.HasPrefix(smp.name, "rlproxy_") {
			continue
		}
		for k := range smp.labels {
			if !allowed[k] {
				t.Errorf("series %s has label %q", smp.name, k)
			}
		}
	}
	var clientText strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "rlproxy_upstream_server_up{") {
			clientText.WriteString(line + "\n")
		}
	}
	for _, leak := range []string{"127.0.0.", secret, "ip:", "{h:"} {
		if strings.Contains(clientText.String(), leak) {
			t.Errorf("scrape contains %q (a client id)", leak)
		}
	}

	opsPromtool(t, text)
	for _, p := range []string{"/healthz", "/readyz"} {
		if resp, body := rlproxytest.Get(t, nil, in.AdminURL+p); resp.StatusCode != 200 {
			t.Errorf("%s: %d %q, want 200", p, resp.StatusCode, body)
		}
	}
	// The probes and /metrics are on the admin listener only.
	if resp, _ := rlproxytest.Get(t, nil, in.URL+"/metrics"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("public /metrics: %d, want 404 (no route)", resp.StatusCode)
	}
}

// opsPromtool lints a scrape with `promtool check metrics`.
func opsPromtool(t *testing.T, text string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("RLPROXY_REQUIRE_TOOLS") == "1" {
			t.Fatal("promtool not installed (RLPROXY_REQUIRE_TOOLS=1)")
		}
		t.Log("promtool not installed: lint skipped")
		return
	}
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestOpsDryRun: a dry-run policy never refuses but counts would-be
// refusals; next to an enforcing policy, the enforcing one is charged even
// when the dry-run one would refuse.
func TestOpsDryRun(t *testing.T) {
	t.Parallel()
	up := rlproxytest.NewUpstream(t)
	in := rlproxytest.Start(t, fmt.Sprintf(`upstreams: { app: { url: %q } }
policies:
  dry: { algorithm: sliding_log, limit: 10, window: 1h, dry_run: true }
  enf: { algorithm: sliding_log, limit: 100, window: 1h }
  dry2: { algorithm: sliding_log, limit: 2, window: 1h, dry_run: true }
routes:
  - { name: dry, match: { path: /dry }, upstream: app, policies: [dry] }
  - { name: mixed, match: { path: /mixed }, upstream: app, policies: [enf, dry2] }
`, up.URL))
	for i := range 50 {
		if resp, _ := rlproxytest.Get(t, nil, in.URL+"/dry"); resp.StatusCode != 200 {
			t.Fatalf("dry-run request %d: status %d, want 200", i+1, resp.StatusCode)
		}
	}
	var last *http.Response
	for i := range 5 {
		resp, _ := rlproxytest.Get(t, nil, in.URL+"/mixed")
		if resp.StatusCode != 200 {
			t.Fatalf("mixed request %d: status %d, want 200", i+1, resp.StatusCode)
		}
		last = resp
	}
	if got := opsMember(last.Header, "enf"); got != 95 {
		t.Errorf("enf r=%d after 5 requests, want 95 (charged every time): %q", got, last.Header.Get("RateLimit"))
	}
	if up.Count() != 55 {
		t.Errorf("upstream saw %d, want 55", up.Count())
	}
	_, s := opsScrape(t, in)
	opsRequests(t, s, map[string]int{
		"dry/dry/allowed": 10, "dry/dry/dry_run_rejected": 40,
		"mixed/enf/allowed":  5,
		"mixed/dry2/allowed": 2, "mixed/dry2/dry_run_rejected": 3,
	})
}

// TestOpsConfigMapSwap mounts the config like a Kubernetes ConfigMap volume
// (rlproxy.yaml → ..data/rlproxy.yaml, ..data → ..<timestamp>) and swaps
// ..data atomically, as the kubelet does: the new limit applies without a
// signal.
func TestOpsConfigMapSwap(t *testing.T) {
	t.Parallel()
	up := rlproxytest.NewUpstream(t)
	dir := t.TempDir()
	cfg := func(limit int) string {
		return fmt.Sprintf(`listen: "127.0.0.1:0"
admin_listen: "127.0.0.1:0"
upstreams: { app: { url: %q } }
policies:
  cm: { algorithm: sliding_log, limit: %d, window: 1h }
routes:
  - { name: cm, match: { path: /cm }, upstream: app, policies: [cm] }
`, up.URL, limit)
	}
	generation := func(name string, limit int) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "rlproxy.yaml"), []byte(cfg(limit)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	generation("..2026_11_29_1", 2)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("..2026_11_29_1", filepath.Join(dir, "..data")))
	must(os.Symlink("..data/rlproxy.yaml", filepath.Join(dir, "rlproxy.yaml")))
	in := rlproxytest.Start(t, "", rlproxytest.FromFile(filepath.Join(dir, "rlproxy.yaml")))

	var codes []int
	for range 3 {
		resp, _ := rlproxytest.Get(t, nil, in.URL+"/cm")
		codes = append(codes, resp.StatusCode)
	}
	if fmt.Sprint(codes) != "[200 200 429]" {
		t.Fatalf("statuses %v, want [200 200 429] under limit 2", codes)
	}

	// The kubelet's update: a new generation, a new ..data link renamed
	// over the old one, the old generation removed.
	generation("..2026_11_29_2", 5)
	must(os.Symlink("..2026_11_29_2", filepath.Join(dir, "..data_tmp")))
	must(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	must(os.RemoveAll(filepath.Join(dir, "..2026_11_29_1")))

	var last *http.Response
	waitfor.True(t, "limit 5 from the swapped ..data to apply", func() bool {
		last, _ = rlproxytest.Get(t, nil, in.URL+"/cm") // refusals are not charged
		return last.StatusCode == 200
	})
	if got := last.Header.Get("RateLimit"); !strings.HasPrefix(got, `"cm";r=2;`) {
		t.Errorf("RateLimit %q after the swap, want r=2 (3 of 5 used)", got)
	}
	if s, f := opsReloads(t, in); s != 1 || f != 0 {
		t.Errorf("reloads success=%d failure=%d, want 1 and 0", s, f)
	}
}

// opsCert writes a fresh self-signed ECDSA certificate for 127.0.0.1 to
// certFile and keyFile (each by rename, so a reader never sees half a
// file) and returns it.
func opsCert(t *testing.T, certFile, keyFile string, serial int64) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("rlproxy ops test %d", serial)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	opsWriteFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), true)
	opsWriteFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), true)
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// opsServedSerial is the serial number of the certificate addr presents on
// a new connection.
func opsServedSerial(t *testing.T, addr string) int64 {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // we only read the certificate
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// TestOpsTLS serves HTTPS from cert files, serves a replaced certificate
// after the files change (the config itself unchanged), and proxies to an
// https upstream trusted through ca_file.
func TestOpsTLS(t *testing.T) {
	t.Parallel()
	upstream := newOpsTLSUpstream(t)
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "upstream-ca.pem")
	cert1 := opsCert(t, certFile, keyFile, 1)
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: upstream.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	in := rlproxytest.Start(t, fmt.Sprintf(`tls: { cert_file: %q, key_file: %q }
upstreams: { secure: { url: %q, ca_file: %q } }
policies:
  p: { algorithm: sliding_log, limit: 100, window: 1h }
routes:
  - { name: s, match: { path_prefix: /s/ }, upstream: secure, policies: [p] }
`, certFile, keyFile, upstream.URL, caFile))
	addr := in.App.Addr()
	client := func(c *x509.Certificate) *http.Client {
		pool := x509.NewCertPool()
		pool.AddCert(c)
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	}
	c1 := client(cert1)
	resp, body := rlproxytest.Get(t, c1, "https://"+addr+"/s/x")
	if resp.StatusCode != 200 || body != "tls upstream: https" {
		t.Fatalf("https through rlproxy to an https upstream: %d %q, want 200 %q", resp.StatusCode, body, "tls upstream: https")
	}
	if resp.TLS == nil || opsMember(resp.Header, "p") != 99 {
		t.Errorf("TLS %v, RateLimit %q", resp.TLS != nil, resp.Header.Get("RateLimit"))
	}
	c1.CloseIdleConnections()

	cert2 := opsCert(t, certFile, keyFile, 2)
	waitfor.True(t, "the replaced certificate to be served", func() bool {
		return opsServedSerial(t, addr) == 2
	})
	c2 := client(cert2)
	if resp, body := rlproxytest.Get(t, c2, "https://"+addr+"/s/y"); resp.StatusCode != 200 || body != "tls upstream: https" {
		t.Errorf("after the certificate change: %d %q", resp.StatusCode, body)
	}
	// A client that trusts only the old certificate now fails: the old one
	// is really gone, not served alongside.
	if _, err := client(cert1).Get("https://" + addr + "/s/z"); err == nil {
		t.Error("a client trusting only the replaced certificate still connects")
	}
}

// newOpsTLSUpstream is an https upstream answering "tls upstream: PROTO"
// with the X-Forwarded-Proto rlproxy sent.
func newOpsTLSUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls upstream: %s", r.Header.Get("X-Forwarded-Proto"))
	}))
	t.Cleanup(s.Close)
	return s
}

// TestOpsRefusalLogSampling: 500 refusals in about a second log at most
// log.refusals_per_second lines per second; the rest are counted and
// reported as suppressed=N on a later line, none lost.
func TestOpsRefusalLogSampling(t *testing.T) {
	t.Parallel()
	const rps = 5
	up := rlproxytest.NewUpstream(t)
	logs := &opsLogBuf{}
	in := rlproxytest.Start(t, fmt.Sprintf(`log: { refusals_per_second: %d }
upstreams: { app: { url: %q } }
policies:
  one: { algorithm: sliding_log, limit: 1, window: 1h, key: global }
routes:
  - { name: r, match: { path: /r }, upstream: app, policies: [one] }
`, rps, up.URL), rlproxytest.WithLog(logs))
	if resp, _ := rlproxytest.Get(t, nil, in.URL+"/r"); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	// Start just after a second boundary: the sampler's window is the
	// wall-clock second.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 20*time.Millisecond)))
	start := time.Now()
	var wg sync.WaitGroup
	var refused atomic.Int64
	for g := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := rlproxytest.ClientFrom(fmt.Sprintf("127.0.0.%d", 40+g))
			for range 50 {
				resp, err := c.Get(in.URL + "/r")
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusTooManyRequests {
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	end := time.Now()
	if refused.Load() != 500 {
		t.Fatalf("%d refused, want 500", refused.Load())
	}
	burst := logs.lines(`msg="request refused"`)
	seconds := int(end.Unix()-start.Unix()) + 1
	t.Logf("500 refusals in %v (%d wall-clock second(s)): %d lines", end.Sub(start), seconds, len(burst))
	if len(burst) > rps*seconds {
		t.Errorf("%d refusal lines in %d second(s), want at most %d per second", len(burst), seconds, rps)
	}
	if seconds == 1 && len(burst) != rps {
		t.Errorf("%d refusal lines within one second, want exactly %d", len(burst), rps)
	}

	// A refusal in a later second is logged and carries the count.
	time.Sleep(time.Until(end.Truncate(time.Second).Add(time.Second + 20*time.Millisecond)))
	if resp, _ := rlproxytest.Get(t, nil, in.URL+"/r"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("later request: %d, want 429", resp.StatusCode)
	}
	all := logs.lines(`msg="request refused"`)
	if len(all) != len(burst)+1 {
		t.Fatalf("%d refusal lines after the later refusal, want %d", len(all), len(burst)+1)
	}
	re := regexp.MustCompile(` suppressed=(\d+)`)
	sum := 0
	for _, l := range all {
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("refusal line without suppressed=: %q", l)
		}
		n, _ := strconv.Atoi(m[1])
		sum += n
	}
	// Every refusal is either a line or counted in one.
	if sum+len(all) != 501 {
		t.Errorf("%d lines + %d suppressed = %d, want 501 refusals", len(all), sum, sum+len(all))
	}
	if seconds == 1 && !strings.Contains(all[len(all)-1], fmt.Sprintf(" suppressed=%d", 500-rps)) {
		t.Errorf("later line %q, want suppressed=%d", all[len(all)-1], 500-rps)
	}
	for _, l := range all {
		if strings.Contains(l, "127.0.0.") && !strings.Contains(l, "key=global") {
			t.Errorf("refusal line names a client address under a global key: %q", l)
		}
	}
}
