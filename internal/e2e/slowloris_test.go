package e2e

import (
	"bufio"
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
)

// fleetEngine is the server.engine entry ("engine: NAME, ") that runs a
// fleet process on the engine the suite runs on (rlproxytest.Engine): a
// fleet process reads only its file, not RLPROXY_TEST_ENGINE.
func fleetEngine() string { return "engine: " + rlproxytest.Engine() + ", " }

// procPeaks samples a real rlproxy process every 100 ms until stop: its
// open descriptors (/proc) and its goroutines (go_goroutines on the admin
// listener), keeping the largest seen.
type procPeaks struct {
	fds, goroutines atomic.Int64
	stop, done      chan struct{}
}

func startPeaks(pid int, adminURL string) *procPeaks {
	p := &procPeaks{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			if n := procFDs(pid); n > p.fds.Load() {
				p.fds.Store(n)
			}
			if n := procGoroutines(adminURL); n > p.goroutines.Load() {
				p.goroutines.Store(n)
			}
			select {
			case <-p.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return p
}

// end stops the sampling and returns the peaks (-1: never read).
func (p *procPeaks) end() (fds, goroutines int64) {
	close(p.stop)
	<-p.done
	return p.fds.Load(), p.goroutines.Load()
}

// procFDs counts pid's open descriptors, -1 when unknown.
func procFDs(pid int) int64 {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return int64(len(ents))
}

// procGoroutines reads go_goroutines from the admin listener's /metrics,
// -1 when unknown (a sampler may not fail the test from its goroutine).
func procGoroutines(adminURL string) int64 {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(adminURL + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return -1
			}
			return int64(n)
		}
	}
	return -1
}

// slowlorisHead is what a slowloris client sends, one byte a second: a
// request head that never ends (the last field's value grows for ever).
const slowlorisHead = "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: "

// slowlorisDial connects from src; a reset before the connection is
// out counts as refused (the cap refused it while it was being accepted).
func slowlorisDial(src, addr string) (c net.Conn, refused bool, err error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c, err = d.Dial("tcp", addr)
	if errors.Is(err, syscall.ECONNRESET) {
		return nil, true, nil
	}
	return c, false, err
}

// slowlorisTrickle sends slowlorisHead on c, then 'a's, one byte a second,
// until rlproxy closes the connection (a read ends or a write fails), and
// returns the connection's lifetime since start.
func slowlorisTrickle(c net.Conn, start time.Time) time.Duration {
	defer c.Close()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = io.Copy(io.Discard, c)
	}()
	for i := 0; ; i++ {
		b := byte('a')
		if i < len(slowlorisHead) {
			b = slowlorisHead[i]
		}
		if _, err := c.Write([]byte{b}); err != nil {
			<-closed
			return time.Since(start)
		}
		select {
		case <-closed:
			return time.Since(start)
		case <-time.After(time.Second):
		}
	}
}

// TestSlowlorisClients (stress form only: RLPROXY_SLOWLORIS_CLIENTS set;
// bench/slowloris.sh runs 10,000): that many clients, spread over ten
// loopback addresses (each under the derived max_connections_per_client,
// 1,218), each send a request head one byte a second and never finish it,
// against a real rlproxy process under an open-file limit of 20,000 with
// the default read_header_timeout (10 s) and max_connections (derived:
// 9,744). Every slowloris connection ends: cut by read_header_timeout,
// reclaimed at the cap (no_request) or refused; none lives past twice
// read_header_timeout (a deadline pushed back by each byte would keep
// them all); a keep-alive probe client from another address sees no
// failure throughout; rlproxy's descriptors stay below its limit and its
// open connections, descriptors and goroutines come back to where they
// were before the load.
func TestSlowlorisClients(t *testing.T) {
	s := os.Getenv("RLPROXY_SLOWLORIS_CLIENTS")
	if s == "" {
		t.Skip("stress form only: RLPROXY_SLOWLORIS_CLIENTS (bench/slowloris.sh)")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("RLPROXY_SLOWLORIS_CLIENTS=%q: want a count", s)
	}
	const nofile, rht = 20000, 10 * time.Second
	up := rlproxytest.NewUpstream(t)
	p := fleet.StartWith(t, 1, fmt.Sprintf("server: { %s}\nupstreams: { app: { url: %q } }\nroutes: [ { name: all, upstream: app } ]\n",
		fleetEngine(), up.URL), fleet.Options{NoFile: nofile}).Procs[0]
	addr := strings.TrimPrefix(p.URL, "http://")

	probe := &boundsProbe{}
	stop, probeDone := make(chan struct{}), make(chan struct{})
	go probe.run(p.URL+"/probe", stop, probeDone)
	e2eWaitForLong(t, "the probe's first answer", func() bool {
		probe.mu.Lock()
		defer probe.mu.Unlock()
		return len(probe.latencies) > 0
	})
	fds0, gor0 := procFDs(p.Pid()), procGoroutines(p.AdminURL)
	peaks := startPeaks(p.Pid(), p.AdminURL)

	var (
		mu      sync.Mutex
		lives   []time.Duration
		refused int
		errs    []error
		next    atomic.Int64
		wg      sync.WaitGroup
	)
	start := time.Now()
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				dialed := time.Now()
				c, ref, err := slowlorisDial(fmt.Sprintf("127.0.2.%d", 1+i%10), addr)
				if err != nil || ref {
					mu.Lock()
					if err != nil {
						errs = append(errs, err)
					} else {
						refused++
					}
					mu.Unlock()
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					life := slowlorisTrickle(c, dialed)
					mu.Lock()
					lives = append(lives, life)
					mu.Unlock()
				}()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	fdsPeak, gorPeak := peaks.end()
	var m map[string]float64
	e2eWaitForLong(t, "the probe's connection alone open", func() bool {
		m = floodMetrics(t, p.AdminURL)
		return m["open"] == 1
	})
	e2eWaitForLong(t, "descriptors and goroutines back to before the load", func() bool {
		return procFDs(p.Pid()) <= fds0+2 && procGoroutines(p.AdminURL) <= gor0+4
	})
	close(stop)
	<-probeDone

	if len(errs) > 0 {
		t.Errorf("%d slowloris clients failed to connect, first: %v", len(errs), errs[0])
	}
	slices.Sort(lives)
	probe.mu.Lock()
	defer probe.mu.Unlock()
	if len(probe.failures) > 0 {
		t.Errorf("probe: %d of %d failed, first: %s", len(probe.failures), len(probe.latencies), probe.failures[0])
	}
	slices.Sort(probe.latencies)
	l := probe.latencies
	t.Logf("%d slowloris clients, the last closed %v after the first dial: %d reset while connecting, rlproxy refused %v (per client %v), reclaimed no_request %v; connection lifetime p50 %v max %v (read_header_timeout %v)",
		n, elapsed.Round(time.Millisecond), refused, m["refused"], m["client"], m["noreq"], pct(lives, 50), pct(lives, 100), rht)
	t.Logf("probe %d requests, %d failed, p50 %v p99 %v max %v", len(l), len(probe.failures), pct(l, 50), pct(l, 99), pct(l, 100))
	t.Logf("rlproxy: at most %d open descriptors of %d (%d before the load), at most %d goroutines (%d before); %s",
		fdsPeak, nofile, fds0, gorPeak, gor0, boundsRSS(p.Pid()))
	if fdsPeak >= nofile || fdsPeak < 0 {
		t.Errorf("rlproxy held %d descriptors, want fewer than its limit %d", fdsPeak, nofile)
	}
	if len(lives) > 0 && lives[len(lives)-1] > 2*rht {
		t.Errorf("a slowloris connection lived %v, want at most 2 × read_header_timeout (%v)", lives[len(lives)-1], 2*rht)
	}
}

// pct returns the p-th percentile of sorted ds (100: the largest), 0 for none.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, len(ds)*p/100)].Round(10 * time.Microsecond)
}
