package h1

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// testProxy is the smallest proxy over the engine, as internal/proxy
// drives it: the client's head written upstream with edits, the body
// streamed, 1xx forwarded, the response head written back with added
// fields, the body streamed, trailers passed, upgrades tunnelled.
type testProxy struct {
	pool    *Pool
	addr    string
	edits   Edits
	back    Edits
	refuse  func(r *Request) int // a status to answer before the body, or 0
	upgrade bool
	bufs    sync.Pool
}

func (p *testProxy) ServeH1(w *ResponseWriter, r *Request) {
	if p.refuse != nil {
		if code := p.refuse(r); code != 0 {
			head := AppendField(AppendStatusLine(w.Scratch(), code, http.StatusText(code)), "Content-Length", "0")
			if w.Closing() {
				head = AppendField(head, "Connection", "close")
			}
			w.WriteHead(append(head, "\r\n"...), NoBody, 0)
			return
		}
	}
	u, _, err := p.pool.Get(context.Background(), p.addr)
	if err != nil {
		p.fail(w, 502)
		return
	}
	bp, _ := p.bufs.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, 32<<10)
		bp = &b
	}
	defer p.bufs.Put(bp)
	err = p.exchange(w, r, u, *bp)
	u.Release(err)
}

func (p *testProxy) fail(w *ResponseWriter, code int) {
	w.CloseAfter()
	head := AppendField(AppendStatusLine(w.Scratch(), code, http.StatusText(code)), "Content-Length", "0")
	w.WriteHead(append(AppendField(head, "Connection", "close"), "\r\n"...), NoBody, 0)
}

func (p *testProxy) exchange(w *ResponseWriter, r *Request, u *UpstreamConn, buf []byte) error {
	e := p.edits
	e.Upgrade = p.upgrade && r.Upgrade()
	bw, err := u.WriteHead(AppendRequest(u.Scratch(), r, r.Target(), &e), r.Framing)
	if err == nil && r.Framing != NoBody {
		if _, err = io.CopyBuffer(bw, r.Body, buf); err == nil {
			err = bw.Close(r.Body.Trailer())
		}
		if _, bad := err.(Reason); bad {
			p.fail(w, 400)
			return err
		}
	}
	if err != nil {
		p.fail(w, 502)
		return err
	}
	resp, err := p.final(w, r, u)
	if err != nil {
		p.fail(w, 502)
		return err
	}
	dechunk := r.ProtoMinor() == 0 && resp.Framing == Chunked
	closing := w.Closing() || resp.Framing == ToClose || dechunk
	head := AppendResponse(w.Scratch(), resp, &p.back, closing, dechunk)
	framing := resp.Framing
	if r.Method() == "HEAD" {
		framing = NoBody
	}
	if err := w.WriteHead(head, framing, resp.Length); err != nil {
		return err
	}
	if resp.Status == 101 {
		return p.tunnel(w, u)
	}
	if _, err := io.CopyBuffer(flushWriter{w}, u.Body(), buf); err != nil {
		w.CloseAfter()
		return err
	}
	return w.Trailer(u.Body().Trailer())
}

// final reads the upstream's response, forwarding 1xx heads (but a 100
// the engine already sent the client).
func (p *testProxy) final(w *ResponseWriter, r *Request, u *UpstreamConn) (*Response, error) {
	for {
		resp, err := u.ReadResponse(r.Method())
		if err != nil || resp.Status >= 200 || resp.Status == 101 {
			return resp, err
		}
		if resp.Status != 100 {
			w.Informational(AppendResponse(w.Scratch(), resp, &Edits{}, false, false))
		}
	}
}

// tunnel copies bytes both ways after a 101 until both sides close.
func (p *testProxy) tunnel(w *ResponseWriter, u *UpstreamConn) error {
	cc, rest, err := w.Hijack()
	if err != nil {
		return err
	}
	uc := u.Conn()
	if len(rest) > 0 {
		uc.Write(rest)
	}
	if b := u.Buffered(); len(b) > 0 {
		cc.Write(b)
	}
	done := make(chan struct{})
	go func() {
		io.Copy(uc, cc)
		uc.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(cc, uc)
	<-done
	cc.Close()
	return errors.New("tunnel ended")
}

// flushWriter flushes after each write: the stream's events go out as
// they come (SSE).
type flushWriter struct{ w *ResponseWriter }

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		err = f.w.Flush()
	}
	return n, err
}

// backend is a real net/http upstream over loopback that records each
// request it receives.
type backend struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // method and target of each request, in order
}

func newBackend(t *testing.T, h http.HandlerFunc) *backend {
	b := &backend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.seen = append(b.seen, r.Method+" "+r.RequestURI)
		b.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *backend) requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.seen...)
}

// startProxy serves p on a loopback listener with srv's settings.
func startProxy(t *testing.T, srv *Server) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); srv.ServeConn(c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		wg.Wait()
	})
	return ln.Addr().String()
}

// roundTrip sends raw on a new connection and returns everything the
// proxy answers until it closes (or 10 s pass).
func roundTrip(t *testing.T, addr, raw string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(c)
	return string(out)
}

func hostOf(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
