package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/rlproxytest"
)

var (
	originOnce sync.Once
	originBin  string
	originErr  error
)

// originBinary builds bench/upstream (the benchmark's origin server: 200
// with a fixed body, GET /__counts) once per test binary.
func originBinary(t *testing.T) string {
	t.Helper()
	originOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rlproxy-origin-")
		if err != nil {
			originErr = err
			return
		}
		originBin = filepath.Join(dir, "upstream")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		// bench/ is a module of its own: build inside it.
		cmd := exec.CommandContext(ctx, "go", "build", "-o", originBin, "./upstream")
		cmd.Dir = filepath.Join("..", "..", "bench")
		if out, err := cmd.CombinedOutput(); err != nil {
			originErr = fmt.Errorf("go build rlproxy/bench/upstream: %v\n%s", err, out)
		}
	})
	if originErr != nil {
		t.Fatal(originErr)
	}
	return originBin
}

// originProc is one upstream process of a pool.
type originProc struct {
	addr string
	proc *netutil.Process
}

func startOrigin(t *testing.T) *originProc {
	t.Helper()
	addr := netutil.FreeAddr(t)
	p, err := netutil.Start(exec.Command(originBinary(t), "-listen", addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	netutil.WaitListening(t, addr, 10*time.Second)
	return &originProc{addr: addr, proc: p}
}

// served is the process's count of data requests (GET /__counts).
func (o *originProc) served(t *testing.T) int64 {
	t.Helper()
	resp, err := http.Get("http://" + o.addr + "/__counts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct{ Total int64 }
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	return c.Total
}

// TestPoolUpstreamProcesses: a pool of 3 upstream processes. 3,000
// requests over round_robin → each process counts 1,000 ± 1; then one is
// SIGKILLed under 50 concurrent clients and, with the default retries: 1,
// no request fails but those whose body was streaming (counted).
func TestPoolUpstreamProcesses(t *testing.T) {
	o := []*originProc{startOrigin(t), startOrigin(t), startOrigin(t)}
	in := rlproxytest.Start(t, fmt.Sprintf(`upstreams:
  app: { urls: ["http://%s", "http://%s", "http://%s"], max_fails: 1, fail_timeout: 30s }
routes: [{ name: r, upstream: app }]
`, o[0].addr, o[1].addr, o[2].addr))
	got := poolRun(t, in.URL+"/anything", 3000, 16)
	for i, p := range o {
		if n := p.served(t); n < 999 || n > 1001 {
			t.Errorf("process %d served %d of 3000, want 1000 ± 1 (answers %v)", i, n, got)
		}
	}
	t.Logf("round_robin over 3 processes, 3000 requests: %d %d %d", o[0].served(t), o[1].served(t), o[2].served(t))

	load := poolKillUnderLoad(t, in.URL+"/anything", 500, o[2].proc.Kill)
	t.Logf("SIGKILL of one process under 50 clients, retries 1: %d ok, %d failed, %d broken while streaming",
		load.ok.Load(), load.failed.Load(), load.streaming.Load())
	if load.failed.Load() != 0 {
		t.Errorf("%d failed requests, want 0 (retried on the other servers)", load.failed.Load())
	}
	_, samples := opsScrape(t, in)
	if up := opsValue(t, samples, "rlproxy_upstream_server_up", "upstream", "app", "server", o[2].addr); up != 0 {
		t.Errorf("rlproxy_upstream_server_up of the killed process = %v, want 0 (max_fails)", up)
	}
}
