package h1

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// TestPoolIdleProbe: a connection on which the upstream sent a byte past
// its response, or which it closed, is not reused; a silent one is.
func TestPoolIdleProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 4096)
				for {
					k, err := c.Read(buf)
					if err != nil {
						c.Close()
						return
					}
					reply := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
					if strings.Contains(string(buf[:k]), "/stray") {
						reply += "HTTP/1.1 200 OK\r\n"
					}
					io.WriteString(c, reply)
				}
			}()
		}
	}()
	p := &Pool{}
	exchange := func(target string) bool {
		u, reused, err := p.Get(context.Background(), ln.Addr().String())
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
