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

// TestOneClientCannotFillListener: 10,000 connections from one address —
// idle (no request), or each after one request, waiting in keep-alive —
// against a real rlproxy process under an open-file limit of 20,000 and
// the derived max_connections (9,744) and max_connections_per_client
// (1,218); then a client from another address opens 250 fresh connections
// one after the other, each GET /: all 250 answered 200. The same with the
// per-client cap off, where idle connections giving way at the cap is
// what admits the probe (a probe connection, idle for a moment after its
// answer, may itself give way to the next). read_header_timeout and idle_timeout are 5
// minutes so that no flood connection expires during the test.
// RLPROXY_CONNFLOOD_CLIENTS changes the 10,000.
func TestOneClientCannotFillListener(t *testing.T) {
	n := 10000
	if s := os.Getenv("RLPROXY_CONNFLOOD_CLIENTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("RLPROXY_CONNFLOOD_CLIENTS=%q: want a count", s)
		}
	}
	up := rlproxytest.NewUpstream(t)
	for i, tc := range []struct {
		name, server string
		request      bool
	}{
		{"idle/derived", "", false},
		{"keepalive/derived", "", true},
		{"idle/per_client_off", "max_connections_per_client: 0, ", false},
		{"keepalive/per_client_off", "max_connections_per_client: 0, ", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each case its own source addresses: the sockets the
			// server closed wait in TIME_WAIT there.
			flooder, prober := fmt.Sprintf("127.0.1.%d", 2*i+2), fmt.Sprintf("127.0.1.%d", 2*i+3)
			yaml := fmt.Sprintf("server: { %s%sread_header_timeout: 5m, idle_timeout: 5m }\nupstreams: { app: { url: %q } }\nroutes: [ { name: all, upstream: app } ]\n", fleetEngine(), tc.server, up.URL)
			p := fleet.StartWith(t, 1, yaml, fleet.Options{NoFile: 20000}).Procs[0]
			addr := strings.TrimPrefix(p.URL, "http://")
			peaks := startPeaks(p.Pid(), p.AdminURL)
			start := time.Now()
			held, served := floodConns(t, flooder, addr, n, tc.request)
			defer func() {
				for _, c := range held {
					// A reset, not a close: 10,000 sockets in TIME_WAIT
					// would hold their ports on the next run.
					_ = c.(*net.TCPConn).SetLinger(0)
					c.Close()
				}
			}()
			flood := time.Since(start)
			// Every flood connection accepted (the kernel's backlog drained):
			// open, refused or reclaimed.
			var m map[string]float64
			e2eWaitForLong(t, "every flood connection accepted", func() bool {
				m = floodMetrics(t, p.AdminURL)
				return m["open"]+m["refused"]+m["client"]+m["idle"]+m["noreq"] == float64(n)
			})
			start = time.Now()
			answered, lat, firstErr := probeFresh(prober, addr, 250)
			probe := time.Since(start)
			after := floodMetrics(t, p.AdminURL)
			fds, goroutines := peaks.end()
			slices.Sort(lat)
			t.Logf("%d connections from %s in %v (%d held by the client, %d requests answered): open %v, refused %v, refused per client %v, reclaimed idle %v / no_request %v; probe from %s: %d of 250 answered in %v (reclaimed during the probe: idle %v, no_request %v)",
				n, flooder, flood.Round(time.Millisecond), len(held), served, m["open"], m["refused"], m["client"], m["idle"], m["noreq"],
				prober, answered, probe.Round(time.Millisecond), after["idle"]-m["idle"], after["noreq"]-m["noreq"])
			t.Logf("probe connections p50 %v p99 %v max %v; rlproxy: at most %d open descriptors, at most %d goroutines; %s",
				pct(lat, 50), pct(lat, 99), pct(lat, 100), fds, goroutines, boundsRSS(p.Pid()))
			if answered != 250 {
				t.Errorf("probe: %d of 250 fresh connections answered, first failure: %v", answered, firstErr)
			}
		})
	}
}

// floodConns opens n connections from the loopback address src, 16
// dialing at a time; with request set each sends GET / and reads the
// answer first. It returns the connections the server did not close at
// once and how many requests were answered.
func floodConns(t *testing.T, src, addr string, n int, request bool) ([]net.Conn, int) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	var (
		mu     sync.Mutex
		held   []net.Conn
		next   atomic.Int64
		served atomic.Int64
		fatal  atomic.Pointer[error]
		wg     sync.WaitGroup
	)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				c, err := d.Dial("tcp", addr)
				if errors.Is(err, syscall.ECONNRESET) {
					continue // refused before connect returned
				}
				if err != nil {
					fatal.CompareAndSwap(nil, &err)
					return
				}
				if request {
					if code, _ := floodGet(c); code == http.StatusOK {
						served.Add(1)
					} else {
						c.Close()
						continue
					}
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := fatal.Load(); err != nil {
		for _, c := range held {
			c.Close()
		}
		t.Fatalf("flood: %v", *err)
	}
	return held, int(served.Load())
}

// floodGet sends GET / on c and reads the answer's status.
func floodGet(c net.Conn) (int, error) {
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

// probeFresh opens n connections from src one after the other, each for
// one GET /, and counts the 200s; it returns each one's time from dial
// to answer.
func probeFresh(src, addr string, n int) (int, []time.Duration, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	ok := 0
	var first error
	lat := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		c, err := d.Dial("tcp", addr)
		if err == nil {
			var code int
			code, err = floodGet(c)
			c.Close()
			lat = append(lat, time.Since(start))
			if code == http.StatusOK {
				ok++
				continue
			}
			if err == nil {
				err = fmt.Errorf("status %d", code)
			}
		}
		if first == nil {
			first = err
		}
	}
	return ok, lat, first
}

// floodMetrics scrapes the public listener's connection counters.
func floodMetrics(t *testing.T, adminURL string) map[string]float64 {
	resp, body := rlproxytest.Get(t, nil, adminURL+"/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: status %d", resp.StatusCode)
	}
	s := opsParse(t, body)
	return map[string]float64{
		"open":    opsValue(t, s, "rlproxy_connections_open", "listener", "public"),
		"refused": opsValue(t, s, "rlproxy_connections_refused_total", "listener", "public"),
		"client":  opsValue(t, s, "rlproxy_connections_per_client_refused_total", "listener", "public"),
		"idle":    opsValue(t, s, "rlproxy_connections_reclaimed_total", "listener", "public", "reason", "idle"),
		"noreq":   opsValue(t, s, "rlproxy_connections_reclaimed_total", "listener", "public", "reason", "no_request"),
	}
}
