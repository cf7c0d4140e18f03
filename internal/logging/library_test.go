package logging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// jsonLines decodes every line of b as one JSON object; a line that is not
// one fails the test (a library line must never reach the log as text).
func jsonLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		out = append(out, m)
	}
	return out
}

// TestLibraryLog: a library's lines become JSON records at the level
// given, named by library, at most LibraryLinesPerSecond a second; the
// next second's first line reports how many were dropped.
func TestLibraryLog(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	now := time.Unix(1_700_000_000, 0)
	lib := libraryLog(l, slog.LevelWarn, "net/http/httputil", func() time.Time { return now })
	for i := range 25 {
		lib.Printf("httputil: ReverseProxy read error during body copy: unexpected EOF %d", i)
	}
	now = now.Add(time.Second)
	lib.Printf("httputil: ReverseProxy read error during body copy: unexpected EOF last")
	lines := jsonLines(t, buf.Bytes())
	if len(lines) != LibraryLinesPerSecond+1 {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), LibraryLinesPerSecond+1, buf.String())
	}
	for i, m := range lines[:LibraryLinesPerSecond] {
		want := fmt.Sprintf("httputil: ReverseProxy read error during body copy: unexpected EOF %d", i)
		if m["level"] != "WARN" || m["msg"] != want || m[LibraryAttr] != "net/http/httputil" || m[SuppressedKey] != nil {
			t.Errorf("line %d: %v, want level WARN, msg %q, library net/http/httputil", i, m, want)
		}
	}
	if last := lines[LibraryLinesPerSecond]; last[SuppressedKey] != float64(15) || !strings.HasSuffix(last["msg"].(string), "last") {
		t.Errorf("next second's line %v, want suppressed 15", last)
	}

	buf.Reset()
	quiet := libraryLog(l, slog.LevelDebug, "net/http", func() time.Time { return now })
	quiet.Printf("http: TLS handshake error from 192.0.2.1:4711: EOF")
	if buf.Len() != 0 {
		t.Errorf("a debug line at level info was written: %s", buf.String())
	}
}
