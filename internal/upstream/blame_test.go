package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/config"
	"rlproxy/internal/testutil/fakeclock"
)

// httpTransport is a real net/http transport as a pool server's Transport.
type httpTransport struct{ *http.Transport }

func (t httpTransport) Close() { t.CloseIdleConnections() }

// failingBody yields its text, then err: a client body that breaks half
// way, as net/http's chunked reader reports a malformed chunk or trailer.
type failingBody struct {
	r   io.Reader
	err error
}

func (b *failingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, b.err
	}
	return n, err
}

func (b *failingBody) Close() error { return nil }

// realPool is a pool (max_fails 1, one retry) over two real loopback
// servers running h, with real transports.
func realPool(t *testing.T, h http.HandlerFunc, now func() time.Time) *Pool {
	t.Helper()
	u := &config.Upstream{Name: "app", Balance: config.BalanceRoundRobin, MaxFails: 1, FailTimeout: time.Minute, Retries: 1}
	for range 2 {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		v, _ := url.Parse(srv.URL)
		u.Servers = append(u.Servers, config.UpstreamServer{URL: v, Weight: 1})
	}
	u.URL = u.Servers[0].URL
	set := NewSet(Options{
		NewTransport: func(*config.Upstream, *url.URL) (Transport, error) {
			return httpTransport{&http.Transport{}}, nil
		},
		Now: now,
	})
	t.Cleanup(set.Close)
	pools, err := set.Update(&config.Config{Upstreams: map[string]*config.Upstream{"app": u}})
	if err != nil {
		t.Fatal(err)
	}
	return pools["app"]
}

// TestBlame: a client's malformed or cut body, a request the transport
// refuses to send and a client that left are the client's: after two such
// requests both servers of a two-server pool (max_fails 1) are still up,
// and each came back as a ClientError of its kind, tried once. A server
// that resets the connection is the server's: two requests take both out.
func TestBlame(t *testing.T) {
	upstream := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" { // gives up on a slow body, as gunicorn or Puma do
			_, _ = io.ReadFull(r.Body, make([]byte, 2))
			c, _, _ := http.NewResponseController(w).Hijack()
			c.Close()
			return
		}
		if r.URL.Path == "/reset" {
			// The whole body first: a body still being sent when the
			// connection goes would be the slow client's excuse (slow).
			_, _ = io.Copy(io.Discard, r.Body)
			c, _, _ := http.NewResponseController(w).Hijack()
			c.Close()
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	clk := fakeclock.New(time.Now()) // the pools' clock, moved by slowBody
	for _, c := range []struct {
		name   string
		req    func() *http.Request
		want   Blame
		upLeft int // servers in rotation afterwards
	}{
		{"malformed chunked body", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, "http://x/", &failingBody{strings.NewReader("hello"), errors.New("malformed chunked encoding")})
			return r
		}, BlameClientBody, 2},
		{"body cut short", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPut, "http://x/", &failingBody{strings.NewReader("hel"), io.ErrUnexpectedEOF})
			r.ContentLength = 5
			return r
		}, BlameClientBody, 2},
		{"method not a token", func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
			r.Method = "G(T"
			return r
		}, BlameClientRequest, 2},
		{"header value with a newline", func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
			r.Header["X-A"] = []string{"a\nb"}
			return r
		}, BlameClientRequest, 2},
		{"client left", func() *http.Request {
			r, _ := http.NewRequestWithContext(gone, http.MethodGet, "http://x/", nil)
			return r
		}, BlameClientGone, 2},
		// The server's error, but not counted against it: the client's
		// body was still arriving (nginx reads a body before sending it).
		{"server gives up on a slow body", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, "http://x/slow", &slowBody{clk: clk})
			r.ContentLength = 2
			return r
		}, BlameServer, 2},
		{"server resets", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, "http://x/reset", strings.NewReader("ok"))
			return r
		}, BlameServer, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := realPool(t, upstream, clk.Now)
			for i := range 2 {
				x := &Exchange{}
				req := c.req()
				req = req.WithContext(WithExchange(req.Context(), x))
				_, err := p.RoundTrip(req)
				var ce *ClientError
				switch {
				case err == nil:
					t.Fatalf("request %d: no error", i)
				case c.want == BlameServer && errors.As(err, &ce):
					t.Fatalf("request %d: %v, want the server's error", i, err)
				case c.want != BlameServer && (!errors.As(err, &ce) || ce.Blame != c.want):
					t.Fatalf("request %d: %v, want a ClientError %s", i, err, c.want)
				case c.want != BlameServer && x.Retries != 0:
					t.Fatalf("request %d: %d retries of the client's fault, want 0", i, x.Retries)
				}
			}
			up := 0
			for _, s := range p.Servers() {
				if s.Up(clk.Now()) {
					up++
				}
			}
			if up != c.upLeft {
				t.Errorf("%d servers in rotation, want %d", up, c.upLeft)
			}
		})
	}
}

// slowBody sends "ab", then takes bodyStall by the pool's clock before its
// end: a client whose body trickles in slower than the upstream waits.
type slowBody struct {
	clk  *fakeclock.Clock
	sent bool
}

func (b *slowBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, "ab"), nil
	}
	b.clk.Advance(bodyStall) // at least: the read counts as stalled
	return 0, io.EOF
}

func (b *slowBody) Close() error { return nil }

// errDialed is the dial error of FuzzSendable's transport: seeing it
// means the transport went on to connect, so it would have sent the request.
var errDialed = errors.New("dialed")

// FuzzSendable checks blame's view of what Go's transport refuses against
// the transport itself: for any method, header name and header value,
// sendable is true exactly when a real http.Transport goes on to dial
// (rather than refusing the request before any connection is made), so a
// request it refuses is never blamed on a server, and one it would send
// never spares one.
func FuzzSendable(f *testing.F) {
	for _, s := range [][3]string{
		{"GET", "X-A", "v"}, {"G(T", "X-A", "v"}, {"", "X-A", "v"}, {"get", "x", "caf\xe9"},
		{"GE T", "X-A", "v"}, {"GET", "X A", "v"}, {"GET", "", "v"}, {"GET", "X-A", "a\nb"},
		{"GET", "X-A", "a\x00b"}, {"GET", "X-A", "\x7f"}, {"M\xc3\xa9", "X-A", "v"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return nil, errDialed }}
	f.Fuzz(func(t *testing.T, method, name, value string) {
		req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:9/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Method, req.Header = method, http.Header{name: {value}}
		_, err = tr.RoundTrip(req)
		if got, dialed := sendable(req), errors.Is(err, errDialed); got != dialed {
			t.Errorf("method %q, field %q: %q: sendable %v, the transport dialed %v (%v)", method, name, value, got, dialed, err)
		}
	})
}

// TestBlameKeepsTrial: a client's fault on a server's trial request (its
// fail_timeout over) hands the trial back: the server may be tried again at
// once instead of being held out for another fail_timeout.
func TestBlameKeepsTrial(t *testing.T) {
	p := realPool(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }, time.Now)
	s0, s1 := p.Servers()[0], p.Servers()[1]
	s0.downUntil.Store(time.Now().Add(-time.Millisecond).UnixNano()) // fail_timeout just ran out
	s1.activeDown.Store(true)                                        // so s0 gets the request
	req, _ := http.NewRequest(http.MethodPost, "http://x/", &failingBody{strings.NewReader("hello"), errors.New("malformed chunked encoding")})
	var ce *ClientError
	if _, err := p.RoundTrip(req); !errors.As(err, &ce) || s0.downUntil.Load() == 0 {
		t.Fatalf("err %v; want a ClientError on the trial", err)
	}
	if !s0.Up(time.Now()) {
		t.Error("after a client's fault on its trial the server is held out, want its trial available again")
	}
	req, _ = http.NewRequest(http.MethodGet, "http://x/", nil)
	if _, err := p.RoundTrip(req); err != nil || !s0.Up(time.Now()) || s0.downUntil.Load() != 0 {
		t.Errorf("the next request (%v) did not put the server back in rotation", err)
	}
}
