package admin

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rlproxy/internal/metrics"
)

func start(t *testing.T, ready func() bool, opts ...Option) (*Server, *metrics.Metrics) {
	t.Helper()
	m := metrics.New(prometheus.NewRegistry(), "test")
	s := New("127.0.0.1:0", m, ready, opts...)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return s, m
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestEndpoints(t *testing.T) {
	var ready atomic.Bool
	s, m := start(t, ready.Load)
	base := "http://" + s.Addr()
	m.PolicyCounters("api", "api").Rejected.Add(3)

	steps := []struct {
		name       string
		setReady   bool
		path       string
		wantStatus int
		wantBody   string // exact, or a substring for /metrics
	}{
		{"healthz", false, "/healthz", 200, "ok\n"},
		{"not ready before config", false, "/readyz", 503, "not ready\n"},
		{"ready after config", true, "/readyz", 200, "ready\n"},
		{"healthz when ready", true, "/healthz", 200, "ok\n"},
		{"metrics", true, "/metrics", 200, `rlproxy_requests_total{decision="rejected",policy="api",route="api"} 3`},
		{"pprof off by default", true, "/debug/pprof/", 404, ""},
		{"unknown path", true, "/", 404, ""},
	}
	for _, st := range steps {
		ready.Store(st.setReady)
		status, body := get(t, base+st.path)
		if status != st.wantStatus {
			t.Errorf("%s: status %d, want %d", st.name, status, st.wantStatus)
		}
		if st.path == "/metrics" {
			if !strings.Contains(body, st.wantBody) {
				t.Errorf("%s: body lacks %q", st.name, st.wantBody)
			}
		} else if st.wantBody != "" && body != st.wantBody {
			t.Errorf("%s: body %q, want %q", st.name, body, st.wantBody)
		}
	}

	resp, err := http.Post(base+"/healthz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz: %d, want 405", resp.StatusCode)
	}
}

func TestPprof(t *testing.T) {
	s, _ := start(t, func() bool { return true }, WithPprof())
	status, body := get(t, "http://"+s.Addr()+"/debug/pprof/goroutine?debug=1")
	if status != 200 || !strings.Contains(body, "goroutine profile:") {
		t.Errorf("pprof goroutine: %d %.80q", status, body)
	}
}

func TestPortInUse(t *testing.T) {
	s, _ := start(t, func() bool { return true })
	m := metrics.New(prometheus.NewRegistry(), "test")
	err := New(s.Addr(), m, func() bool { return true }).Start()
	if err == nil || !strings.Contains(err.Error(), "listening on admin address "+s.Addr()) {
		t.Errorf("second Start on %s: %v", s.Addr(), err)
	}
}

func TestProbe(t *testing.T) {
	var ready atomic.Bool
	s, _ := start(t, ready.Load)
	base := "http://" + s.Addr()
	if err := Probe(base+"/healthz", time.Second); err != nil {
		t.Errorf("healthz probe: %v", err)
	}
	err := Probe(base+"/readyz", time.Second)
	if want := "probing " + base + "/readyz: status 503"; err == nil || err.Error() != want {
		t.Errorf("readyz probe while not ready: %v, want %q", err, want)
	}
	ready.Store(true)
	if err := Probe(base+"/readyz", time.Second); err != nil {
		t.Errorf("readyz probe when ready: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := Probe(base+"/healthz", time.Second); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("probe after shutdown: %v, want connection refused", err)
	}
	if err := Probe("http://[::1", time.Second); err == nil {
		t.Error("probe of a malformed URL: want error")
	}
}

// TestProbeTimeout: a server that accepts but never answers fails the probe
// at its timeout (200 ms), well before a 2 s bound.
func TestProbeTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	begin := time.Now()
	err = Probe("http://"+ln.Addr().String()+"/healthz", 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "context deadline exceeded") {
		t.Errorf("probe of a silent server: %v, want a deadline error", err)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("probe took %v, want about 200ms", d)
	}
}
