// Package rlproxytest runs a real rlproxy (package server: the production
// wiring) inside a test, from YAML text, on free loopback ports, plus a
// recording upstream to put behind it.
package rlproxytest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"rlproxy/internal/server"
)

// Instance is one running rlproxy.
type Instance struct {
	// App is the running application (Reload, Handler, Shutdown).
	App *server.App
	// URL is the public base URL, e.g. "http://127.0.0.1:41234".
	URL string
	// AdminURL is the admin base URL ("" when admin_listen is "").
	AdminURL string
	// ConfigPath is the file the instance loaded (rewrite it to reload).
	ConfigPath string
}

// Start writes yaml to a temporary config file and runs rlproxy on it. The
// placeholders "{{listen}}" and "{{admin}}" may appear in yaml; when yaml
// has no `listen:` line, "listen: 127.0.0.1:0" (a free port) is added, and
// likewise `admin_listen: 127.0.0.1:0`. The instance shuts down at test end.
func Start(t testing.TB, yaml string) *Instance {
	t.Helper()
	return StartWithLog(t, yaml, nil)
}

// StartWithLog is Start with the process log also written to w (when not
// nil), for tests that assert on log lines; w must be safe for concurrent
// use.
func StartWithLog(t testing.TB, yaml string, w io.Writer) *Instance {
	t.Helper()
	return StartOpts(t, yaml, Opts{Log: w})
}

// Opts are StartOpts' options.
type Opts struct {
	// Log, when not nil, also receives the process log; it must be safe
	// for concurrent use.
	Log io.Writer
	// Now, when not nil, is the time every rate-limit decision is made at
	// (server.Options.Now): a test advances it instead of sleeping.
	Now func() time.Time
}

// StartOpts is Start with opts.
func StartOpts(t testing.TB, yaml string, opts Opts) *Instance {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "rlproxy.yaml")
	if !strings.Contains(yaml, "listen:") {
		yaml = "listen: \"127.0.0.1:0\"\n" + yaml
	}
	if !strings.Contains(yaml, "admin_listen:") {
		yaml = "admin_listen: \"127.0.0.1:0\"\n" + yaml
	}
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return startFile(t, path, opts)
}

// StartFile runs rlproxy on an existing config file (its listen addresses
// should be 127.0.0.1:0). The log goes to the test log on failure.
func StartFile(t testing.TB, path string) *Instance {
	t.Helper()
	return StartFileWithLog(t, path, nil)
}

// StartFileWithLog is StartFile with the process log also written to w
// (when not nil); w must be safe for concurrent use.
func StartFileWithLog(t testing.TB, path string, w io.Writer) *Instance {
	t.Helper()
	return startFile(t, path, Opts{Log: w})
}

func startFile(t testing.TB, path string, opts Opts) *Instance {
	t.Helper()
	var log io.Writer = &testLog{t: t}
	if opts.Log != nil {
		log = io.MultiWriter(log, opts.Log)
	}
	app, err := server.New(path, server.Options{Version: "test", Log: log, Debounce: 50 * time.Millisecond, Now: opts.Now})
	if err != nil {
		t.Fatalf("starting rlproxy: %v", err)
	}
	if err := app.Start(); err != nil {
		t.Fatalf("starting rlproxy: %v", err)
	}
	in := &Instance{App: app, URL: "http://" + app.Addr(), ConfigPath: path}
	if a := app.AdminAddr(); a != "" {
		in.AdminURL = "http://" + a
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = app.Shutdown(ctx)
	})
	return in
}

// Rewrite replaces the config file's content with yaml atomically (a
// temporary file renamed over it), so the instance's file watcher, which
// may fire at any moment after an earlier change, never reads a half-
// written file. It does not reload: call in.App.Reload for a synchronous
// reload.
func (in *Instance) Rewrite(t testing.TB, yaml string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(in.ConfigPath), "."+filepath.Base(in.ConfigPath)+".new")
	if err := os.WriteFile(tmp, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, in.ConfigPath); err != nil {
		t.Fatal(err)
	}
}

// Metrics scrapes the admin listener's /metrics (admin_listen must be on)
// and parses it as a Prometheus server would: the metric families by name.
func (in *Instance) Metrics(t testing.TB) map[string]*dto.MetricFamily {
	t.Helper()
	if in.AdminURL == "" {
		t.Fatal("Metrics: the instance has no admin listener")
	}
	resp, body := Get(t, nil, in.AdminURL+"/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: status %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	return mfs
}

// testLog sends the process log to t.Log (shown for failing or -v tests).
type testLog struct {
	t  testing.TB
	mu sync.Mutex
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Upstream is a recording HTTP upstream: it answers 200 "ok" (or runs
// Handler when set) and remembers every request it received.
type Upstream struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
	// Handler, when set before requests arrive, answers instead of "ok".
	Handler http.HandlerFunc
}

// NewUpstream starts a recording upstream on a free loopback port.
func NewUpstream(t testing.TB) *Upstream {
	u := &Upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, r.Clone(context.Background()))
		h := u.Handler
		u.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(u.Close)
	return u
}

// Requests returns the requests received so far.
func (u *Upstream) Requests() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.reqs...)
}

// Count returns how many requests were received.
func (u *Upstream) Count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.reqs)
}

// ClientFrom returns an HTTP client whose connections come from the
// loopback address ip (e.g. "127.0.0.7"), so tests can play several
// clients: Linux accepts any 127.0.0.0/8 source address.
func ClientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{
		Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64},
		Timeout:   30 * time.Second,
	}
}

// Get sends GET url with the given header pairs ("Name", "value", ...)
// through c (nil = http.DefaultClient) and returns the response with its
// body read into the second result.
func Get(t testing.TB, c *http.Client, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}
