package h1

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"rlproxy/internal/testutil/netutil"
)

// TestPoolIdleProbe: a connection on which the upstream sent a byte past
// its response, or which it closed, is not reused; a silent one is.
func TestPoolIdleProbe(t *testing.T) {
	addr := netutil.ServeConns(t, func(c net.Conn) {
		buf := make([]byte, 4096)
		for {
			k, err := c.Read(buf)
			if err != nil {
				return
			}
			reply := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
			if strings.Contains(string(buf[:k]), "/stray") {
				reply += "HTTP/1.1 200 OK\r\n"
			}
			io.WriteString(c, reply)
		}
	})
	p := &Pool{}
	exchange := func(target string) bool {
		u, reused, err := p.Get(context.Background(), addr)
		if err != nil {
			t.Fatal(err)
		}
		bw, _ := u.WriteHead([]byte("GET "+target+" HTTP/1.1\r\nHost: u\r\n\r\n"), NoBody)
		_ = bw
		resp, err := u.ReadResponse("GET")
		if err != nil || resp.Status != 200 {
			t.Fatal(resp, err)
		}
		io.Copy(io.Discard, u.Body())
		u.Release(nil)
		return reused
	}
	if exchange("/a") || !exchange("/b") {
		t.Fatal("a silent connection was not reused")
	}
	exchange("/stray")
	if exchange("/c") {
		t.Fatal("a connection with stray bytes was reused")
	}
}

// TestPoolReadTimeout: an upstream that stalls in the middle of a body is
// cut after ReadTimeout without a byte, and the connection not reused.
func TestPoolReadTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stall := make(chan struct{})
	defer close(stall)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Read(make([]byte, 4096))
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
		<-stall
	}()
	const d = 200 * time.Millisecond
	p := &Pool{ReadTimeout: d}
	u, _, err := p.Get(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	u.WriteHead([]byte("GET / HTTP/1.1\r\nHost: u\r\n\r\n"), NoBody)
	if _, err := u.ReadResponse("GET"); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(u.Body())
	if string(got) != "abc" || !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) < d {
		t.Fatalf("read %q, %v after %v", got, err, time.Since(start))
	}
	u.Release(err)
	if len(p.idle[ln.Addr().String()]) != 0 {
		t.Fatal("a cut connection went back to the pool")
	}
}

// TestPoolHeaderTimeout: an upstream that never answers is cut after
// HeaderTimeout, though ReadTimeout is longer.
func TestPoolHeaderTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	const d = 200 * time.Millisecond
	p := &Pool{HeaderTimeout: d, ReadTimeout: time.Hour}
	u, _, err := p.Get(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	u.WriteHead([]byte("GET / HTTP/1.1\r\nHost: u\r\n\r\n"), NoBody)
	if _, err := u.ReadResponse("GET"); !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) < d {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
	u.Release(err)
}

// TestPoolStaleIdle: bytes an upstream sends on a connection after its
// response, while the connection is idle, are found before the next
// request goes out on it: ReadResponse (a head without body) and
// WriteHead (a head with one) fail with ErrStale, the upstream receives
// nothing more on that connection, and the next Get dials a new one. The
// stray bytes are a whole response, which a reader of the next answer
// would otherwise take for it.
func TestPoolStaleIdle(t *testing.T) {
	for _, f := range []Framing{NoBody, Length} {
		heads := make(chan string, 8)
		strayNow := make(chan struct{})
		addr := netutil.ServeConns(t, func(c net.Conn) {
			buf := make([]byte, 4096)
			for {
				k, err := c.Read(buf)
				if err != nil {
					return
				}
				heads <- c.RemoteAddr().String() + " " + strings.SplitN(string(buf[:k]), " ", 3)[1]
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				if strings.Contains(string(buf[:k]), "/stray") {
					<-strayNow
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil")
				}
			}
		})
		p := &Pool{}
		get := func() *UpstreamConn {
			u, _, err := p.Get(context.Background(), addr)
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
		// The first exchange reads its whole response before the stray
		// bytes are sent (strayNow).
		u := get()
		u.WriteHead([]byte("GET /stray HTTP/1.1\r\nHost: u\r\n\r\n"), NoBody)
		resp, err := u.ReadResponse("GET")
		if err != nil || resp.Status != 200 {
			t.Fatal(resp, err)
		}
		first := <-heads
		if got, _ := io.ReadAll(u.Body()); string(got) != "ok" {
			t.Fatalf("body %q", got)
		}
		u.Release(nil)
		close(strayNow)
		waitReadable(t, u.nc)
		u = get()
		head := "GET /next HTTP/1.1\r\nHost: u\r\n\r\n"
		if f == Length {
			head = "POST /next HTTP/1.1\r\nHost: u\r\nContent-Length: 1\r\n\r\n"
		}
		_, err = u.WriteHead([]byte(head), f)
		if f == NoBody {
			_, err = u.ReadResponse("GET")
		}
		if !errors.Is(err, ErrStale) {
			t.Fatalf("%v: the stale connection gave %v, want ErrStale", f, err)
		}
		u.Discard()
		u = get()
		u.WriteHead([]byte("GET /fresh HTTP/1.1\r\nHost: u\r\n\r\n"), NoBody)
		if resp, err := u.ReadResponse("GET"); err != nil || resp.Status != 200 {
			t.Fatal(resp, err)
		}
		second := <-heads
		if strings.Fields(first)[0] == strings.Fields(second)[0] || strings.Fields(second)[1] != "/fresh" {
			t.Fatalf("%v: the upstream received %q after %q, want /fresh on a new connection", f, second, first)
		}
		u.Discard()
	}
}

// waitReadable waits (5 s at most) until c's socket has bytes to read,
// peeking without taking them.
func waitReadable(t *testing.T, c net.Conn) {
	t.Helper()
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		raw.Read(func(fd uintptr) bool {
			var b [1]byte
			n, _, _ = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			return true
		})
		if n > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the stray bytes never arrived")
}

// TestPoolIdleTimeout: a connection idle for IdleTimeout or longer is not
// used again: its exchange fails with ErrStale before anything is sent,
// and the next Get dials a new one. One idle for less is reused.
func TestPoolIdleTimeout(t *testing.T) {
	conns := make(chan string, 8)
	addr := netutil.ServeConns(t, func(c net.Conn) {
		conns <- c.RemoteAddr().String()
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	now := time.Unix(1_000_000, 0)
	p := &Pool{IdleTimeout: time.Minute, Now: func() time.Time { return now }}
	exchange := func() (reused bool, err error) {
		u, reused, err := p.Get(context.Background(), addr)
		if err != nil {
			t.Fatal(err)
		}
		u.WriteHead([]byte("GET / HTTP/1.1\r\nHost: u\r\n\r\n"), NoBody)
		if _, err := u.ReadResponse("GET"); err != nil {
			u.Discard()
			return reused, err
		}
		io.Copy(io.Discard, u.Body())
		u.Release(nil)
		return reused, nil
	}
	if reused, err := exchange(); reused || err != nil {
		t.Fatal(reused, err)
	}
	now = now.Add(time.Minute - time.Second)
	if reused, err := exchange(); !reused || err != nil {
		t.Fatalf("idle 59 s: reused %v, %v; want reused", reused, err)
	}
	now = now.Add(time.Minute)
	if reused, err := exchange(); !reused || !errors.Is(err, ErrStale) {
		t.Fatalf("idle 60 s: reused %v, %v; want ErrStale", reused, err)
	}
	if reused, err := exchange(); reused || err != nil {
		t.Fatalf("after the stale one: reused %v, %v; want a new connection", reused, err)
	}
	if n := len(conns); n != 2 {
		t.Fatalf("%d connections dialled, want 2", n)
	}
}

// goneWatch is a ClientWatch whose client has gone once gone is set.
type goneWatch struct{ gone atomic.Bool }

func (g *goneWatch) Gone() bool { return g.gone.Load() }

// TestPoolWatchClient: a ReadResponse waiting for a head that never comes
// ends with ErrClientGone at the first check after the watched client
// left (about a second, clientCheck), not at HeaderTimeout; an unwatched
// one, or one whose client stays, waits until HeaderTimeout.
func TestPoolWatchClient(t *testing.T) {
	addr := netutil.ServeConns(t, func(c net.Conn) { io.Copy(io.Discard, c) }) // never answers
	watched := &Pool{HeaderTimeout: time.Minute}
	p := &Pool{HeaderTimeout: 2500 * time.Millisecond}
	wait := func(p *Pool, w ClientWatch) (time.Duration, error) {
		u, _, err := p.Get(context.Background(), addr)
		if err != nil {
			t.Fatal(err)
		}
		defer u.Discard()
		u.WriteHead([]byte("GET / HTTP/1.1\r\nHost: u\r\n\r\n"), NoBody)
		if w != nil {
			u.WatchClient(w)
		}
		start := time.Now()
		_, err = u.ReadResponse("GET")
		return time.Since(start), err
	}
	g := &goneWatch{}
	g.gone.Store(true)
	if d, err := wait(watched, g); err != ErrClientGone || d < clientCheck {
		t.Fatalf("client gone: %v after %v, want ErrClientGone after a check (%v), long before %v",
			err, d, clientCheck, watched.HeaderTimeout)
	}
	if d, err := wait(p, &goneWatch{}); !errors.Is(err, os.ErrDeadlineExceeded) || d < p.HeaderTimeout {
		t.Fatalf("client there: %v after %v, want the timeout after %v", err, d, p.HeaderTimeout)
	}
	if d, err := wait(p, nil); !errors.Is(err, os.ErrDeadlineExceeded) || d < p.HeaderTimeout {
		t.Fatalf("unwatched: %v after %v, want the timeout after %v", err, d, p.HeaderTimeout)
	}
}

// TestProbeGone: a socket whose peer sent bytes is not gone (and the
// bytes stay to be read); once the peer closed, it is.
func TestProbeGone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var p IdleProbe
	p.Init(c)
	if p.Gone() {
		t.Fatal("gone before anything happened")
	}
	io.WriteString(peer, "x")
	waitReadable(t, c)
	if p.Gone() {
		t.Fatal("gone with a byte waiting")
	}
	if b := make([]byte, 2); func() bool { k, _ := c.Read(b); return k != 1 || b[0] != 'x' }() {
		t.Fatal("Gone took the waiting byte")
	}
	peer.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !p.Gone() {
		if time.Now().After(deadline) {
			t.Fatal("not gone 5 s after the peer closed")
		}
		time.Sleep(time.Millisecond)
	}
}
