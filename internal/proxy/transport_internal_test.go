package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/testutil/waitfor"
)

// Which responses leave their connection in the idle pool: only a body
// read to its end, with neither side asking for Connection: close.
func TestDirectTransportPool(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, strings.Repeat("x", 64<<10))
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	cases := []struct {
		path     string
		read     int64 // bytes read before Close; -1 = all
		reqClose bool
		pooled   int
	}{
		{"/all", -1, false, 1},
		{"/part", 1024, false, 0},
		{"/none", 0, false, 0},
		{"/close", -1, false, 0},
		{"/all", -1, true, 0},
	}
	for _, c := range cases {
		dt := newDirectTransport(u, &http.Transport{MaxIdleConnsPerHost: 4})
		defer dt.Close()
		req, _ := http.NewRequest(http.MethodGet, up.URL+c.path, nil)
		req.Close = c.reqClose
		resp, err := dt.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if c.read < 0 {
			_, err = io.Copy(io.Discard, resp.Body)
		} else {
			_, err = io.CopyN(io.Discard, resp.Body, c.read)
		}
		if err != nil {
			t.Fatalf("%s: reading: %v", c.path, err)
		}
		resp.Body.Close()
		if n := dt.idleLen(); n != c.pooled {
			t.Errorf("%s read %d, request close %v: %d pooled, want %d", c.path, c.read, c.reqClose, n, c.pooled)
		}
	}
}

// An idle connection is closed once idle for IdleConnTimeout, and one that
// ends its exchange after Close is closed rather than pooled.
func TestDirectTransportIdleTimeoutAndClose(t *testing.T) {
	var closed atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok")
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	u, _ := url.Parse(up.URL)
	dt := newDirectTransport(u, &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 200 * time.Millisecond})
	roundTrip := func() *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, up.URL, nil)
		resp, err := dt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := roundTrip()
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	idle := time.Now()
	if dt.idleLen() != 1 {
		t.Fatalf("%d pooled after a full read, want 1", dt.idleLen())
	}
	// Only the janitor's timer closes it, and the upstream sees that close
	// on a goroutine of its own: wait for both rather than guess a time.
	waitfor.True(t, "the idle connection closed and the upstream told", func() bool {
		return dt.idleLen() == 0 && closed.Load() == 1
	})
	if d := time.Since(idle); d < 200*time.Millisecond {
		t.Errorf("the idle connection closed within %v, before its 200 ms IdleConnTimeout", d)
	}
	resp = roundTrip()
	dt.Close()
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if n := dt.idleLen(); n != 0 {
		t.Errorf("%d pooled after Close, want 0", n)
	}
}

// An upstream header beyond maxResponseHeaderBytes is an error, not an
// unbounded read.
func TestDirectTransportHeaderBound(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for i := range 40 {
			w.Header().Set(fmt.Sprintf("X-Big-%d", i), strings.Repeat("v", 30<<10))
		}
		io.WriteString(w, "ok")
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	dt := newDirectTransport(u, &http.Transport{MaxIdleConnsPerHost: 4})
	defer dt.Close()
	req, _ := http.NewRequest(http.MethodGet, up.URL, nil)
	resp, err := dt.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
		t.Fatal("a 1.2 MB response header was accepted")
	}
	if !strings.Contains(err.Error(), "larger than 1048576 bytes") {
		t.Errorf("error %q, want the header bound", err)
	}
}

// idleLen is the number of pooled idle connections (tests only).
func (t *directTransport) idleLen() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.idle)
}
