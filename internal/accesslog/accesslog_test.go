package accesslog

import (
	"bytes"
	"encoding/json"
	"io"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/config"
)

// gateWriter blocks every Write until open is closed, then records;
// entered is signalled when the first Write starts.
type gateWriter struct {
	open    chan struct{}
	entered chan struct{}
	once    sync.Once
	mu      sync.Mutex
	buf     bytes.Buffer
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.once.Do(func() { close(g.entered) })
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

func entry(i int) *Entry {
	return &Entry{Time: time.Unix(1700000000, 0), Client: netip.MustParseAddr("192.0.2.1"), Peer: netip.MustParseAddrPort("192.0.2.1:5000"),
		Method: "GET", Host: "api.example", Path: "/v1/items", Query: "api_key=s3cr3t&page=" + string(rune('0'+i%10)),
		Proto: "HTTP/1.1", Status: 200, Bytes: 13, Duration: 1500 * time.Microsecond, Route: "api",
		Decision: "delayed", WaitMS: 120, Upstream: "10.0.0.1:80", UpstreamStatus: 200,
		UpstreamTime: time.Millisecond, RequestID: "abc", Redact: []string{"api_key"}, Referer: "https://x/?api_key=s3cr3t"}
}

// TestBufferBound: with the writer stalled, lines up to the buffer's bound
// are kept and written once it moves; the rest are dropped and counted,
// and Log never blocked.
func TestBufferBound(t *testing.T) {
	g := &gateWriter{open: make(chan struct{}), entered: make(chan struct{})}
	var dropped atomic.Int64
	l, err := New(config.AccessLog{Enabled: true, Format: "json", Buffer: 16}, g, func() { dropped.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	l.Log(entry(0))
	<-g.entered // the writer holds line 0, stalled; the queue is empty
	const n = 100
	done := make(chan struct{})
	go func() {
		for i := range n {
			l.Log(entry(i + 1))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Log blocked on a stalled writer")
	}
	close(g.open)
	_ = l.Close()
	if lines := strings.Count(g.buf.String(), "\n"); lines != 1+16 || dropped.Load() != n-16 {
		t.Errorf("%d lines written, %d dropped; want 17 (the stalled one and the 16 queued) and %d", lines, dropped.Load(), n-16)
	}
}

// TestNoLossBelowBound: lines below the bound are all written, Close
// included.
func TestNoLossBelowBound(t *testing.T) {
	var buf syncBuffer
	var dropped atomic.Int64
	l, _ := New(config.AccessLog{Enabled: true, Buffer: 1000}, &buf, func() { dropped.Add(1) })
	for i := range 1000 {
		l.Log(entry(i))
	}
	_ = l.Close()
	if got := strings.Count(buf.String(), "\n"); got != 1000 || dropped.Load() != 0 {
		t.Errorf("%d lines, %d dropped, want 1000 and 0", got, dropped.Load())
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestFormats: a JSON line parses with every field, a combined line has
// nginx's layout; neither shows the key.
func TestFormats(t *testing.T) {
	e := entry(3)
	line := appendJSON(nil, e)
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	for _, f := range []string{"time", "client", "peer", "method", "host", "path", "protocol", "status", "bytes",
		"duration_ms", "route", "decision", "upstream", "upstream_status", "upstream_ms", "retries", "request_id"} {
		if _, ok := m[f]; !ok {
			t.Errorf("field %q missing in %s", f, line)
		}
	}
	if m["path"] != "/v1/items?api_key=REDACTED&page=3" || m["decision"] != "delayed 120 ms" || m["duration_ms"] != 1.5 {
		t.Errorf("line %s", line)
	}
	comb := string(appendCombined(nil, e))
	want := `192.0.2.1 - - [` + e.Time.Format("02/Jan/2006:15:04:05 -0700") + `] "GET /v1/items?api_key=REDACTED&page=3 HTTP/1.1" 200 13 "https://x/" "" rt=0.001 route="api" decision="delayed 120 ms" upstream="10.0.0.1:80" us=200 ut=0.001 retries=0 id="abc" peer="192.0.2.1:5000"` + "\n"
	if comb != want {
		t.Errorf("combined:\n%s\nwant:\n%s", comb, want)
	}
	for _, l := range []string{string(line), comb} {
		if strings.Contains(l, "s3cr3t") {
			t.Errorf("the key leaked: %s", l)
		}
	}
	if got := string(appendJSONString(nil, "a\"\\\x01\xffé")); got != `"a\"\\\u0001\ufffdé"` {
		t.Errorf("escaping: %s", got)
	}
}

// BenchmarkLog is the request path's share of a JSON line: format and queue.
func BenchmarkLog(b *testing.B) {
	l, _ := New(config.AccessLog{Enabled: true, Buffer: 1 << 16}, io.Discard, nil)
	defer l.Close()
	e := entry(1)
	b.ReportAllocs()
	for b.Loop() {
		l.Log(e)
	}
}
