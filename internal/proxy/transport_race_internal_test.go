package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"rlproxy/internal/testutil/waitfor"
)

// A reused connection the upstream closed after it passed the idle check
// (silent): the request's write fails — within req.Write itself when the
// header exceeds the 4 KiB write buffer — or its read finds EOF; either
// way roundTrip asks for a retry on another connection, never a 502.
func TestDirectTransportStaleAfterIdleCheck(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	dt := newDirectTransport(u, &http.Transport{MaxIdleConnsPerHost: 4})
	defer dt.Close()
	for _, size := range []int{0, 1 << 10, 16 << 10, 64 << 10} {
		// One exchange, so the upstream tracks the connection as idle.
		warm, _ := http.NewRequest(http.MethodGet, up.URL, nil)
		resp, err := dt.RoundTrip(warm)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		pc, reused, err := dt.get(context.Background())
		if err != nil || !reused {
			t.Fatalf("get: reused %v, %v; want the idle connection", reused, err)
		}
		up.CloseClientConnections()
		// The upstream's FIN is at the connection once its own idle probe
		// no longer reads quiet (it reads EOF: nothing is consumed).
		waitfor.True(t, "the upstream's FIN at the reused connection", func() bool { return !pc.silent() })
		req, _ := http.NewRequest(http.MethodGet, up.URL, nil)
		req.Header.Set("Cookie", strings.Repeat("c", size))
		var retry bool
		resp, retry, err = pc.roundTrip(req, true)
		if resp != nil || !retry || err != errStaleConn {
			t.Errorf("%d-byte cookie on a closed reused connection: resp %v, retry %v, err %v; want nil, true, errStaleConn", size, resp != nil, retry, err)
		}
	}
}

// hookConn calls onZeroReadDeadline before clearing a read deadline.
type hookConn struct {
	net.Conn
	onZeroReadDeadline func()
	deadlineSet        chan struct{}
	once               sync.Once
}

func (c *hookConn) SetDeadline(d time.Time) error {
	err := c.Conn.SetDeadline(d)
	if d.Equal(aLongTimeAgo) {
		c.once.Do(func() { close(c.deadlineSet) })
	}
	return err
}

func (c *hookConn) SetReadDeadline(d time.Time) error {
	if d.IsZero() && c.onZeroReadDeadline != nil {
		c.onZeroReadDeadline()
	}
	return c.Conn.SetReadDeadline(d)
}

// The client leaves in the instant between the response header and the
// clearing of the header read deadline: the AfterFunc's past deadline is
// overwritten and the body read no longer notices the cancellation.
func TestDirectTransportCancelAfterHeader(t *testing.T) {
	hold := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-hold // the body never comes (a long poll)
	}))
	defer up.Close()
	defer close(hold)
	u, _ := url.Parse(up.URL)
	dt := newDirectTransport(u, &http.Transport{MaxIdleConnsPerHost: 4, ResponseHeaderTimeout: 30 * time.Second})
	defer dt.Close()
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hc := &hookConn{Conn: c, deadlineSet: make(chan struct{})}
	hc.onZeroReadDeadline = func() {
		cancel()
		<-hc.deadlineSet // the AfterFunc ran: the conn's deadline is in the past
	}
	pc := &directConn{t: dt, conn: hc}
	pc.br = newBR(pc)
	pc.bw = newBW(hc)
	req, _ := http.NewRequestWithContext(ctx, "GET", up.URL, nil)
	resp, _, err := pc.roundTrip(req, false)
	if err != nil {
		t.Logf("roundTrip: %v (cancellation noticed: fine)", err)
		return
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()
	select {
	case err := <-done:
		t.Logf("body read ended: %v", err)
	case <-time.After(2 * time.Second):
		t.Errorf("request context cancelled, yet the body read still blocks 2s later (deadline cleared by roundTrip)")
		hc.Close()
	}
}

// A sweep racing Close leaves a closed transport with no idle connection
// and no janitor armed.
func TestDirectTransportSweepCloseRace(t *testing.T) {
	for range 1000 {
		dt := &directTransport{maxIdle: 8, idleTimeout: time.Hour, fallback: &http.Transport{}}
		for range 8 {
			a, b := net.Pipe()
			defer b.Close()
			dt.idle = append(dt.idle, &directConn{t: dt, conn: a, since: time.Now()})
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); dt.sweep() }()
		go func() { defer wg.Done(); dt.Close() }()
		wg.Wait()
		dt.mu.Lock()
		n, armed := len(dt.idle), dt.janitor != nil
		dt.mu.Unlock()
		if n != 0 || armed {
			t.Fatalf("after sweep and Close: %d idle connections, janitor armed %v; want 0, false", n, armed)
		}
	}
}

func newBR(pc *directConn) *bufio.Reader { return bufio.NewReaderSize(pc, 4096) }
func newBW(c net.Conn) *bufio.Writer     { return bufio.NewWriterSize(c, 4096) }
