package e2e

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"rlproxy/internal/testutil/fleet"
	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// boundsClients is how many non-reading clients TestNonReadingClients
// opens: 500 in the normal suite (short form), RLPROXY_NONREADING_CLIENTS
// for the stress form (bench/nonreading.sh runs 10,000 against a real
// process).
func boundsClients(t *testing.T) (n int, stress bool) {
	if s := os.Getenv("RLPROXY_NONREADING_CLIENTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("RLPROXY_NONREADING_CLIENTS=%q: want a count", s)
		}
		return n, true
	}
	return 500, false
}

// boundsUpstream streams up to 100 MB to every request for /big (32 KiB
// writes, until one fails) and answers "ok" otherwise; active counts the
// /big handlers running, i.e. upstream connections a client still holds.
// The /big connection is hijacked to give it a 32 KiB send buffer: the
// kernel would otherwise let megabytes pile up per stalled connection
// before the proxy stops reading, which only costs the test time.
type boundsUpstream struct {
	*rlproxytest.Upstream
	active, most atomic.Int64 // running /big handlers, and their maximum
}

func newBoundsUpstream(t *testing.T) *boundsUpstream {
	u := &boundsUpstream{Upstream: rlproxytest.NewUpstream(t)}
	u.Handler = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/big" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		for now := u.active.Add(1); ; {
			if m := u.most.Load(); now <= m || u.most.CompareAndSwap(m, now) {
				break
			}
		}
		defer u.active.Add(-1)
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetWriteBuffer(32 << 10)
		}
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", 100<<20); err != nil {
			return
		}
		buf := make([]byte, 32<<10)
		for sent := 0; sent < 100<<20; sent += len(buf) {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}
	return u
}

// boundsDial opens a connection with a 4 KiB receive buffer (set before
// connecting, so the window stays small) and sends GET /big; it never
// reads until the test says so.
func boundsDial(addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// boundsProbe is a well-behaved keep-alive client: GET /probe every 20 ms
// on one connection until stop, recording failures and latencies.
type boundsProbe struct {
	mu        sync.Mutex
	failures  []string
	latencies []time.Duration
}

func (p *boundsProbe) run(url string, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 1}}
	for {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		start := time.Now()
		code, _, err := shutdownGet(c, url)
		p.mu.Lock()
		p.latencies = append(p.latencies, time.Since(start))
		if code != http.StatusOK {
			p.failures = append(p.failures, fmt.Sprintf("status %d, %v", code, err))
		}
		p.mu.Unlock()
	}
}

// boundsTarget is the rlproxy under test: in-process (short form), or a
// real process with an open-file limit of nofile (stress form, pid > 0).
type boundsTarget struct {
	url, adminURL, addr string
	pid, nofile         int
}

// boundsStart starts rlproxy with yaml: in-process for the short form, or
// (RLPROXY_NONREADING_CLIENTS set) a real process whose max_connections is
// left to its default, under an open-file limit of
// RLPROXY_NONREADING_NOFILE (default 20,000, the setting).
func boundsStart(t *testing.T, yaml string, stress bool) boundsTarget {
	if !stress {
		in := rlproxytest.Start(t, "server: { write_timeout: 1s, max_connections: 400 }\n"+yaml)
		return boundsTarget{url: in.URL, adminURL: in.AdminURL, addr: in.App.Addr()}
	}
	nofile := 20000
	if s := os.Getenv("RLPROXY_NONREADING_NOFILE"); s != "" {
		var err error
		if nofile, err = strconv.Atoi(s); err != nil || nofile < 64 {
			t.Fatalf("RLPROXY_NONREADING_NOFILE=%q: want a limit of at least 64", s)
		}
	}
	// write_timeout 20s: every client is connected before the first is
	// cut, so the cap (not the cutting) bounds the descriptors.
	f := fleet.StartWith(t, 1, "server: { "+fleetEngine()+"write_timeout: 20s }\n"+yaml, fleet.Options{NoFile: nofile})
	p := f.Procs[0]
	return boundsTarget{url: p.URL, adminURL: p.AdminURL, addr: strings.TrimPrefix(p.URL, "http://"), pid: p.Pid(), nofile: nofile}
}

// metrics scrapes the target's connection counters (refused: by
// max_connections or max_connections_per_client) and its upstream errors
// (502s: requests whose upstream dial failed).
func (b boundsTarget) metrics(t *testing.T) (open, refused, cut, failed float64) {
	resp, body := rlproxytest.Get(t, nil, b.adminURL+"/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: status %d", resp.StatusCode)
	}
	s := opsParse(t, body)
	return opsValue(t, s, "rlproxy_connections_open", "listener", "public"),
		opsValue(t, s, "rlproxy_connections_refused_total", "listener", "public") +
			opsValue(t, s, "rlproxy_connections_per_client_refused_total", "listener", "public"),
		opsValue(t, s, "rlproxy_write_timeouts_total", "listener", "public"),
		opsValue(t, s, "rlproxy_upstream_errors_total", "route", "all")
}

// TestNonReadingClients: clients that send GET for a 100 MB response and
// never read are cut once a write has blocked for write_timeout (1 s), or
// refused at once beyond max_connections_per_client (they and the probe
// share 127.0.0.1; 64, derived from max_connections 400, in the short
// form; in the stress form the defaults, derived from the 20,000-fd limit:
// how many are refused depends on how fast they connect, so it is counted,
// not asserted: TestMaxConnections and TestPerClientCap in internal/server
// are exact); no more
// upstream connections are held at once than the cap allows; the upstream
// connection of every cut client is closed; the open-connection gauge
// comes back to the probe alone; a keep-alive probe client sees no failure
// throughout; and (stress form) rlproxy's descriptors stay below its limit.
func TestNonReadingClients(t *testing.T) {
	n, stress := boundsClients(t)
	up := newBoundsUpstream(t)
	target := boundsStart(t, fmt.Sprintf(`
upstreams: { app: { url: %q } }
routes: [ { name: all, upstream: app } ]
`, up.URL), stress)
	probe := &boundsProbe{}
	stop, probeDone := make(chan struct{}), make(chan struct{})
	go probe.run(target.url+"/probe", stop, probeDone)
	waitfor.True(t, "the probe's first answer", func() bool {
		probe.mu.Lock()
		defer probe.mu.Unlock()
		return len(probe.latencies) > 0
	})
	var peaks *procPeaks
	if stress {
		peaks = startPeaks(target.pid, target.adminURL)
	}

	start := time.Now()
	conns := boundsFlood(t, target.addr, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	t.Logf("%d clients connected in %v", n, time.Since(start).Round(time.Millisecond))
	var open, refused, cut, failed float64
	e2eWaitForLong(t, "every client cut or refused", func() bool {
		open, refused, cut, failed = target.metrics(t)
		return refused+cut+failed == float64(n) && open == 1
	})
	// A 502 is the test's own upstream failing to accept in time (a
	// loaded machine, in the stress form): that client was answered.
	if failed > 0 {
		t.Logf("%v requests got 502: the test's upstream did not accept in time", failed)
		if !stress {
			t.Errorf("%v upstream errors, want 0", failed)
		}
	}
	t.Logf("all cut or refused %v after the first dial", time.Since(start).Round(time.Millisecond))
	if d := time.Since(start); d < time.Second {
		t.Errorf("all cut %v after connecting, before write_timeout (1s)", d)
	}
	// Each accepted client holds one upstream connection: never more than
	// the per-client cap minus the probe's connection.
	if most := up.most.Load(); !stress && most > 63 {
		t.Errorf("%d upstream connections held at once, want at most 63 (max_connections_per_client 64)", most)
	}
	e2eWaitForLong(t, "the upstream connections of cut clients closed", func() bool { return up.active.Load() == 0 })

	// Each client reads what the kernel held, then the end of its connection.
	for i, c := range conns {
		if c == nil {
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("client %d: %v, want its connection closed", i, err)
		}
	}
	close(stop)
	<-probeDone
	probe.mu.Lock()
	defer probe.mu.Unlock()
	if len(probe.failures) > 0 {
		t.Errorf("probe: %d of %d failed, first: %s", len(probe.failures), len(probe.latencies), probe.failures[0])
	}
	slices.Sort(probe.latencies)
	l := probe.latencies
	t.Logf("%d clients: %v refused, %v cut by write_timeout, %v answered 502, %d upstream connections held at most; probe %d requests, 0 failed, p50 %v p99 %v max %v",
		n, refused, cut, failed, up.most.Load(), len(l), l[len(l)/2], l[len(l)*99/100], l[len(l)-1])
	if stress {
		mostFDs, mostGoroutines := peaks.end()
		t.Logf("rlproxy: at most %d open descriptors of %d, at most %d goroutines; %s", mostFDs, target.nofile, mostGoroutines, boundsRSS(target.pid))
		if mostFDs >= int64(target.nofile) || mostFDs < 0 {
			t.Errorf("rlproxy held %d descriptors, want fewer than its limit %d", mostFDs, target.nofile)
		}
	}
}

// boundsRSS reads a process's peak and current resident memory.
func boundsRSS(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "RSS unknown"
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") || strings.HasPrefix(line, "VmRSS:") {
			out = append(out, strings.Join(strings.Fields(line), " "))
		}
	}
	return strings.Join(out, ", ")
}

// boundsFlood opens n non-reading clients (boundsDial), 16 dialing at a time.
func boundsFlood(t *testing.T, addr string, n int) []net.Conn {
	conns := make([]net.Conn, n)
	errs := make(chan error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				c, err := boundsDial(addr)
				switch {
				case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
					// Refused at the cap before the request was out.
				case err != nil:
					errs <- fmt.Errorf("dial %d: %w", i, err)
					return
				default:
					conns[i] = c
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		t.Fatal(err)
	}
	return conns
}

// e2eWaitForLong is waitfor.True with 120 s to wait (many clients to cut).
func e2eWaitForLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.Within(t, 120*time.Second, what, cond)
}
