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

// Option changes how Start runs an instance.
type Option func(*options)

type options struct {
	log   io.Writer
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) bool
	file  string
}

// WithLog also writes the process log to w (the test log always gets it, and
// shows it for failing or -v tests); w must be safe for concurrent use.
func WithLog(w io.Writer) Option { return func(o *options) { o.log = w } }

// WithNow makes every rate-limit decision at now() (server.Options.Now), so
// a test advances a fake clock instead of sleeping.
func WithNow(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithSleep serves the leaky-bucket waits on sleep (server.Options.Sleep),
// for example a fake clock's (fakeclock.Clock.Sleep, with WithNow of the
// same clock): a held request goes on when the test advances that clock.
func WithSleep(sleep func(ctx context.Context, d time.Duration) bool) Option {
	return func(o *options) { o.sleep = sleep }
}

// FromFile runs the instance on the existing config file at path, loaded as
// it is (its listen addresses should be 127.0.0.1:0); Start's yaml must then
// be "".
func FromFile(path string) Option { return func(o *options) { o.file = path } }

// Start writes yaml to a temporary config file and runs rlproxy on it: when
// yaml has no `listen:` line, "listen: 127.0.0.1:0" (a free port) is added,
// and likewise `admin_listen: 127.0.0.1:0`. With FromFile, the named file is
// loaded instead. The instance shuts down at test end.
func Start(t testing.TB, yaml string, opts ...Option) *Instance {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	path := o.file
	switch {
	case path == "":
		path = writeConfig(t, yaml)
	case yaml != "":
		t.Fatal("rlproxytest.Start: both yaml and FromFile given")
	}
	var log io.Writer = &testLog{t: t}
	if o.log != nil {
		log = io.MultiWriter(log, o.log)
	}
	app, err := server.New(path, server.Options{Version: "test", Log: log, Debounce: 50 * time.Millisecond, Now: o.now, Sleep: o.sleep,
		DefaultEngine: Engine()})
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

// EngineEnv names the environment variable that picks the engine every
// instance serves HTTP/1.x with when its file sets no server.engine:
// "auto" (the default) or "std". scripts/test.sh runs the end-to-end
// suite once with each.
const EngineEnv = "RLPROXY_TEST_ENGINE"

// Engine returns the engine instances run on unless their file names
// one: EngineEnv's value, or "auto".
func Engine() string {
	if e := os.Getenv(EngineEnv); e != "" {
		return e
	}
	return "auto"
}

// writeConfig writes yaml, with free loopback listeners added where it names
// none, to a file in a temporary directory and returns the file's path.
func writeConfig(t testing.TB, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rlproxy.yaml")
	if !strings.Contains(yaml, "listen:") {
		yaml = "listen: \"127.0.0.1:0\"\n" + yaml
	}
	if !strings.Contains(yaml, "admin_listen:") {
		yaml = "admin_listen: \"127.0.0.1:0\"\n" + yaml
	}
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
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
	return Do(t, c, http.MethodGet, url, "", header...)
}

// Do is Get for any method, with body as the request's body ("" sends
// none: no Content-Length, no Transfer-Encoding).
func Do(t testing.TB, c *http.Client, method, url, body string, header ...string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
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
