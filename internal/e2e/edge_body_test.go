package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"rlproxy/internal/testutil/nginxtest"
	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// bodyUpstream counts the body bytes each request brought, and whether
// the body was complete (EOF) or cut (a read error), in arrival order.
type bodyUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []bodySeen
}

type bodySeen struct {
	bytes    int64
	complete bool
}

func newBodyUpstream(t *testing.T) *bodyUpstream {
	u := &bodyUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, bodySeen{n, err == nil})
		u.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(u.Close)
	return u
}

// take returns what the upstream saw since the last take, waiting up to
// 5 s for want requests (a cut request reaches the handler's end after
// the client's answer).
func (u *bodyUpstream) take(want int) []bodySeen {
	waitfor.Poll(5*time.Second, func() bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		return len(u.seen) >= want
	})
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.seen
	u.seen = nil
	return s
}

// edgeBodyLimit is the limit both servers get: nginx client_max_body_size
// and rlproxy max_body_size.
const edgeBodyLimit = 64 << 10

// TestNginxBodySizeDifferential sends the same uploads to nginx 1.22 with
// `client_max_body_size 64k` and to rlproxy with `max_body_size: 64k`, and
// compares the status and what the upstream received: a declared
// Content-Length under and at the limit passes whole (200), one byte over
// is 413 with nothing forwarded. A chunked body crossing the limit is 413
// in both; nginx buffers request bodies (proxy_request_buffering on) and
// forwards nothing, rlproxy streams them and cuts the upstream request at
// the limit: its upstream gets at most the limit and never a complete body.
func TestNginxBodySizeDifferential(t *testing.T) {
	if nginxtest.Binary() == "" && os.Getenv("RLPROXY_REQUIRE_NGINX") != "1" {
		t.Skip("skipping: nginx not installed")
	}
	ngxUp, rlUp := newBodyUpstream(t), newBodyUpstream(t)
	ngx := nginxtest.Start(t, fmt.Sprintf(`
    server {
        listen {{listen}};
        client_max_body_size 64k;
        location / { proxy_pass %s; proxy_http_version 1.1; }
    }`, ngxUp.URL))
	in := rlproxytest.Start(t, fmt.Sprintf(`
upstreams: { app: { url: %q } }
routes:
  - { name: up, match: { path_prefix: / }, upstream: app, max_body_size: 64k }
`, rlUp.URL))

	cases := []struct {
		name    string
		size    int
		chunked bool
		status  int
	}{
		{"under", edgeBodyLimit - 1, false, 200},
		{"at", edgeBodyLimit, false, 200},
		{"over", edgeBodyLimit + 1, false, 413},
		{"chunked_crossing", 100 << 10, true, 413},
	}
	for _, c := range cases {
		for _, tg := range []struct {
			name string
			url  string
			up   *bodyUpstream
		}{{"nginx", ngx.URL, ngxUp}, {"rlproxy", in.URL, rlUp}} {
			var body io.Reader = bytes.NewReader(make([]byte, c.size))
			if c.chunked {
				body = io.MultiReader(body) // no length known: chunked
			}
			req, _ := http.NewRequest(http.MethodPost, tg.url+"/upload", body)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", c.name, tg.name, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Errorf("%s %s: status %d, want %d", c.name, tg.name, resp.StatusCode, c.status)
			}
			wantReqs := 0
			if c.status == 200 || (c.chunked && tg.name == "rlproxy") {
				wantReqs = 1
			}
			seen := tg.up.take(wantReqs)
			var got int64
			for _, s := range seen {
				got += s.bytes
			}
			t.Logf("%-16s %-7s status %d, upstream received %d bytes in %d requests", c.name, tg.name, resp.StatusCode, got, len(seen))
			switch {
			case c.status == 200:
				if len(seen) != 1 || got != int64(c.size) || !seen[0].complete {
					t.Errorf("%s %s: upstream saw %+v, want one complete body of %d bytes", c.name, tg.name, seen, c.size)
				}
			case c.chunked && tg.name == "rlproxy":
				if len(seen) > 1 || got > edgeBodyLimit || (len(seen) == 1 && seen[0].complete) {
					t.Errorf("%s %s: upstream saw %+v, want at most %d bytes of a body cut short", c.name, tg.name, seen, edgeBodyLimit)
				}
			default:
				if len(seen) != 0 {
					t.Errorf("%s %s: upstream saw %+v, want nothing", c.name, tg.name, seen)
				}
			}
			if c.status == 413 && tg.name == "rlproxy" && resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s: Content-Type %q, want application/problem+json", c.name, resp.Header.Get("Content-Type"))
			}
		}
	}
}

// countingZeros is an endless (up to n bytes) stream of zeros that counts
// what was read from it: a 1 GiB upload without a GiB in memory.
type countingZeros struct {
	mu   sync.Mutex
	n    int64
	read int64
}

func (z *countingZeros) Read(p []byte) (int, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.read >= z.n {
		return 0, io.EOF
	}
	k := int(min(int64(len(p)), z.n-z.read))
	clear(p[:k])
	z.read += int64(k)
	return k, nil
}

func (z *countingZeros) sent() int64 {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.read
}

// vmRSS is this process's resident set size in bytes (Linux).
func vmRSS(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Skip("no VmRSS")
	return 0
}

// TestUploadGiBToMiBRoute sends 1 GiB to a route limited to 1 MiB, twice:
// declared with Expect: 100-continue (the 413 comes before any body byte:
// no 100 Continue is sent, the client sends nothing) and chunked while the
// client reads the answer. Both get 413; the upstream receives nothing,
// then at most 1 MiB; the client gets to send only a small part of the
// GiB; the process's RSS does not grow with the upload.
func TestUploadGiBToMiBRoute(t *testing.T) {
	up := newBodyUpstream(t)
	in := rlproxytest.Start(t, fmt.Sprintf(`
upstreams: { app: { url: %q } }
routes:
  - { name: up, match: { path_prefix: / }, upstream: app, max_body_size: 1MiB }
`, up.URL))
	const gib = 1 << 30
	rss0 := vmRSS(t)
	client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: 10 * time.Second}, Timeout: 60 * time.Second}
	t.Cleanup(client.CloseIdleConnections)

	t.Run("expect_continue", func(t *testing.T) {
		z := &countingZeros{n: gib}
		req, _ := http.NewRequest(http.MethodPut, in.URL+"/big", z)
		req.ContentLength = gib
		req.Header.Set("Expect", "100-continue")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("status %d, want 413", resp.StatusCode)
		}
		if n := z.sent(); n != 0 {
			t.Errorf("the client sent %d body bytes, want 0 (no 100 Continue)", n)
		}
		if s := up.take(0); len(s) != 0 {
			t.Errorf("upstream saw %+v, want nothing", s)
		}
	})
	t.Run("chunked", func(t *testing.T) {
		z := &countingZeros{n: gib}
		req, _ := http.NewRequest(http.MethodPut, in.URL+"/big", io.MultiReader(z))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("status %d, want 413", resp.StatusCode)
		}
		seen := up.take(1)
		var got int64
		for _, s := range seen {
			got += s.bytes
		}
		if got > 1<<20 || len(seen) > 1 || (len(seen) == 1 && seen[0].complete) {
			t.Errorf("upstream saw %+v, want at most 1 MiB of a cut body", seen)
		}
		// The connection closes after the 413: the client cannot push
		// the GiB through (socket buffers and the server's short discard
		// take some MiB at most).
		if n := z.sent(); n > 64<<20 {
			t.Errorf("the client sent %d bytes, want the upload cut near 1 MiB", n)
		}
		t.Logf("client sent %d bytes, upstream received %d", z.sent(), got)
	})
	if grew := vmRSS(t) - rss0; grew > 64<<20 {
		t.Errorf("RSS grew by %d MiB over the uploads, want it not to grow with them", grew>>20)
	}
}

// TestBodyTooLargeRefunded: a body that grows past max_body_size after
// the route's policy charged it is refused with 413 and refunded (charged
// by none, as a shaping-cap refusal), over HTTP/1.1 chunked and over
// HTTP/2 (h2c) without a declared length: with a quota of one request,
// the next small request still passes, and is the one that is charged.
// Over HTTP/2 the 413 resets its stream only: the next request reuses the
// connection.
func TestBodyTooLargeRefunded(t *testing.T) {
	for _, proto := range []string{"http1", "h2c"} {
		t.Run(proto, func(t *testing.T) {
			up := newBodyUpstream(t)
			in := rlproxytest.Start(t, fmt.Sprintf(`
server: { h2c: true }
upstreams: { app: { url: %q } }
policies:
  one: { algorithm: fixed_window, limit: 1, window: 1m, key: ip }
routes:
  - { name: up, match: { path_prefix: / }, upstream: app, policies: [one], max_body_size: 4k }
`, up.URL))
			tr := &http.Transport{}
			if proto == "h2c" {
				tr.Protocols = new(http.Protocols)
				tr.Protocols.SetUnencryptedHTTP2(true)
			}
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			t.Cleanup(client.CloseIdleConnections)
			reused := false
			post := func(n int) *http.Response {
				req, _ := http.NewRequest(http.MethodPost, in.URL+"/x", io.MultiReader(bytes.NewReader(make([]byte, n))))
				req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
					GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
				}))
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if proto == "h2c" && resp.ProtoMajor != 2 {
					t.Fatalf("protocol %s, want HTTP/2", resp.Proto)
				}
				return resp
			}
			if r := post(8 << 10); r.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("8 KiB body: status %d, want 413", r.StatusCode)
			}
			if s := up.take(1); len(s) > 1 || (len(s) == 1 && (s[0].complete || s[0].bytes > 4<<10)) {
				t.Errorf("upstream saw %+v, want at most 4 KiB of a cut body", s)
			}
			if r := post(1 << 10); r.StatusCode != http.StatusOK {
				t.Fatalf("1 KiB body after the refused one: status %d, want 200 (the 413 refunded)", r.StatusCode)
			}
			if proto == "h2c" && !reused {
				t.Error("HTTP/2: the request after a 413 came on a new connection, want the 413's stream reset alone")
			}
			if r := post(1 << 10); r.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("second 1 KiB body: status %d, want 429 (quota 1)", r.StatusCode)
			}
		})
	}
}

// TestBodyTooLargeAfterResponse: an upstream that answers before it reads
// the body (its head and first bytes already on their way to the client)
// cannot be turned into a 413 when the chunked body then grows past the
// limit: the upstream request is aborted (it receives at most the limit,
// never a complete body) and the client's response is cut, not completed.
func TestBodyTooLargeAfterResponse(t *testing.T) {
	got := make(chan bodySeen, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex()
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "started\n")
		w.(http.Flusher).Flush()
		n, err := io.Copy(io.Discard, r.Body)
		got <- bodySeen{n, err == nil}
		_, _ = io.WriteString(w, "done\n")
	}))
	t.Cleanup(up.Close)
	in := rlproxytest.Start(t, fmt.Sprintf(`
upstreams: { app: { url: %q } }
routes:
  - { name: up, match: { path_prefix: / }, upstream: app, max_body_size: 64k }
`, up.URL))
	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, in.URL+"/duplex", pr)
	client := &http.Client{Timeout: 10 * time.Second}
	go func() {
		_, _ = pw.Write(make([]byte, 1024)) // the upstream answers once the request arrives
	}()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want the upstream's 200", resp.StatusCode)
	}
	go func() { // then the body grows past the limit
		_, _ = pw.Write(make([]byte, 128<<10))
		pw.Close()
	}()
	body, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("response read whole (%q), want it cut", body)
	}
	t.Logf("client read %q, then %v", body, err)
	select {
	case s := <-got:
		if s.complete || s.bytes > edgeBodyLimit {
			t.Errorf("upstream saw %+v, want at most %d bytes of a cut body", s, edgeBodyLimit)
		}
	case <-time.After(5 * time.Second):
		t.Error("the upstream's read of the body never ended")
	}
}
