package proxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// rawUpstream is a byte-level HTTP/1.1 upstream: it parses requests with
// http.ReadRequest and lets script write anything back on the raw conn.
type rawUpstream struct {
	ln       net.Listener
	URL      string
	conns    atomic.Int64
	requests atomic.Int64
	openNow  atomic.Int64
	mu       sync.Mutex
	open     []net.Conn
}

// script answers req (the n-th request on this conn, from 0); false closes.
type rawScript func(c net.Conn, br *bufio.Reader, req *http.Request, n int) bool

func newRawUpstream(t *testing.T, script rawScript) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{ln: ln, URL: "http://" + ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.conns.Add(1)
			u.mu.Lock()
			u.open = append(u.open, c)
			u.mu.Unlock()
			u.openNow.Add(1)
			go func() {
				defer u.openNow.Add(-1)
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					u.requests.Add(1)
					if !script(c, br, req, n) {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(u.Close)
	return u
}

func (u *rawUpstream) Close() {
	u.ln.Close()
	u.mu.Lock()
	for _, c := range u.open {
		c.Close()
	}
	u.mu.Unlock()
}

// refProxy is a plain httputil.ReverseProxy over a fresh http.Transport: the
// reference behaviour.
func refProxy(t *testing.T, upstream string) *httptest.Server {
	t.Helper()
	target, _ := url.Parse(upstream)
	tr := &http.Transport{MaxIdleConnsPerHost: 1024, DisableCompression: true}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target); pr.Out.Host = pr.In.Host },
		Transport: tr,
	}
	px := httptest.NewServer(rp)
	t.Cleanup(func() { px.Close(); tr.CloseIdleConnections() })
	return px
}

// proxyFor returns the base URL of a proxy to upstream: rlproxy's request
// path (which "rlproxy") or the reference.
func proxyFor(t *testing.T, which, upstream string) string {
	t.Helper()
	if which == "rlproxy" {
		return proxyTo(t, upstream, "").URL
	}
	return refProxy(t, upstream).URL
}

// tryGet is get without t.Fatal on transport errors.
func tryGet(c *http.Client, method, url string) (int, string, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
