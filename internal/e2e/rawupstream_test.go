package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"rlproxy/internal/testutil/netutil"
)

// rawRequest is what the raw upstream received for one request: the
// request line, the header lines as sent (name case, order, repeats), the
// body after de-chunking, and whether it came chunked.
type rawRequest struct {
	line    string
	headers []string // "Name: value" as on the wire
	body    string
	chunked bool
}

// header returns the first value of name (case-insensitive) and whether
// it was present.
func (r *rawRequest) header(name string) (string, bool) {
	for _, h := range r.headers {
		k, v, _ := strings.Cut(h, ":")
		if strings.EqualFold(k, name) {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// rawUpstream is an HTTP/1.1 server on a raw socket that records the bytes
// of every request it reads and answers each one itself, so a test sees
// exactly what a proxy sent (no net/http canonicalising or unfolding in
// between). It follows Content-Length and chunked framing, keeps
// connections alive, and answers:
//   - a path containing "/nocontenttype": 200 with an HTML body and no
//     Content-Type;
//   - otherwise 200 "ok" as text/plain.
//
// Requests are keyed by their X-Case header.
type rawUpstream struct {
	listen string // the listener's address
	mu     sync.Mutex
	seen   map[string][]rawRequest
}

func newRawUpstream(t *testing.T) *rawUpstream {
	t.Helper()
	u := &rawUpstream{seen: map[string][]rawRequest{}}
	u.listen = netutil.ServeConns(t, u.serve)
	return u
}

func (u *rawUpstream) addr() string { return u.listen }

// take returns and forgets the requests recorded under case name.
func (u *rawUpstream) take(name string) []rawRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	r := u.seen[name]
	delete(u.seen, name)
	return r
}

func (u *rawUpstream) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		req, err := readRawRequest(br, c)
		if err != nil {
			return
		}
		name, _ := req.header("X-Case")
		u.mu.Lock()
		u.seen[name] = append(u.seen[name], req)
		u.mu.Unlock()
		resp := "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
		if strings.Contains(req.line, "/nocontenttype") {
			resp = "HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n<html>hi</html>"
		}
		if strings.HasPrefix(req.line, "HEAD ") {
			resp = resp[:strings.Index(resp, "\r\n\r\n")+4]
		}
		if _, err := io.WriteString(c, resp); err != nil {
			return
		}
	}
}

// readRawRequest reads one request from br; w receives a 100 Continue when
// the request expects one.
func readRawRequest(br *bufio.Reader, w io.Writer) (rawRequest, error) {
	var req rawRequest
	line, err := br.ReadString('\n')
	if err != nil {
		return req, err
	}
	req.line = strings.TrimRight(line, "\r\n")
	length := 0
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			return req, err
		}
		l = strings.TrimRight(l, "\r\n")
		if l == "" {
			break
		}
		req.headers = append(req.headers, l)
		k, v, _ := strings.Cut(l, ":")
		v = strings.TrimSpace(v)
		switch strings.ToLower(k) {
		case "content-length":
			length, _ = strconv.Atoi(v)
		case "transfer-encoding":
			req.chunked = strings.EqualFold(v, "chunked")
		case "expect":
			if strings.EqualFold(v, "100-continue") {
				_, _ = io.WriteString(w, "HTTP/1.1 100 Continue\r\n\r\n")
			}
		}
	}
	var body bytes.Buffer
	if req.chunked {
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return req, err
			}
			size, _, _ := strings.Cut(strings.TrimRight(l, "\r\n"), ";")
			n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
			if err != nil {
				return req, fmt.Errorf("chunk size %q: %w", l, err)
			}
			if n == 0 {
				for { // trailers up to the empty line
					l, err := br.ReadString('\n')
					if err != nil {
						return req, err
					}
					if strings.TrimRight(l, "\r\n") == "" {
						break
					}
				}
				break
			}
			if _, err := io.CopyN(&body, br, n); err != nil {
				return req, err
			}
			if _, err := br.Discard(2); err != nil {
				return req, err
			}
		}
	} else if length > 0 {
		if _, err := io.CopyN(&body, br, int64(length)); err != nil {
			return req, err
		}
	}
	req.body = body.String()
	return req, nil
}
