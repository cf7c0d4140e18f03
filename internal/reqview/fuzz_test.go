package reqview

import (
	"strings"
	"testing"
)

// FuzzPath checks Path, a port of nginx's state machine, against an
// independent model of what that machine computes, built from segments
// (RFC 3986 §5.2.4 remove_dot_segments): split the path at "/" (raw or
// %2F), decode each segment, drop empty ones (merge_slashes), resolve "."
// and "..", refuse a ".." above the root, a bad escape and an escaped NUL;
// a decoded "%", "?" or "#" is a plain byte. A route chosen for the
// normalized path is the route chosen for its every spelling, so equal
// paths mean equal routes (the nginx differential in package policy
// compares routes with a real nginx).
func FuzzPath(f *testing.F) {
	for _, s := range []string{
		"/", "/login", "//a//b/", "/a/./b/../c", "/..", "/a/..", "/a/.", "/%2e%2e/x", "/a%2f..%2fb",
		"/.%2e/", "/%2E./x", "/a/%2e", "/a%00", "/a%", "/a%2", "/%zz", "/%25/../x", "/%3f/..", "/..%3F",
		"/.%25", "/...", "/a/..b/..", "/x/%2f%2f/./", "/\xc3\xa9/%C3%A9",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tail string) {
		raw := "/" + tail
		got, ok := Path(raw)
		want, wantOK := segmentPath(raw)
		if got != want || ok != wantOK {
			t.Fatalf("Path(%q) = %q, %v; segment model %q, %v", raw, got, ok, want, wantOK)
		}
		if ok && (strings.Contains(got, "//") || !strings.HasPrefix(got, "/")) {
			t.Fatalf("Path(%q) = %q: not a normalized path", raw, got)
		}
	})
}

// segmentPath is FuzzPath's model of nginx's normalization of raw.
func segmentPath(raw string) (string, bool) {
	var segs []string
	trailing := false // the path ends with a separator, or a "." or ".." segment
	for _, part := range splitSlashes(raw) {
		seg, ok := decode(part)
		if !ok {
			return "", false
		}
		trailing = false
		switch seg {
		case "":
			trailing = true
		case ".":
			trailing = true
		case "..":
			if len(segs) == 0 {
				return "", false
			}
			segs, trailing = segs[:len(segs)-1], true
		default:
			segs = append(segs, seg)
		}
	}
	p := "/" + strings.Join(segs, "/")
	if trailing && len(segs) > 0 {
		p += "/"
	}
	return p, true
}

// splitSlashes splits raw at "/" and at "%2F" (any case), after its
// leading "/".
func splitSlashes(raw string) []string {
	var parts []string
	start := 1
	for i := 1; i < len(raw); i++ {
		switch {
		case raw[i] == '/':
			parts = append(parts, raw[start:i])
			start = i + 1
		case raw[i] == '%' && i+2 < len(raw) && raw[i+1] == '2' && (raw[i+2] == 'f' || raw[i+2] == 'F'):
			parts = append(parts, raw[start:i])
			start = i + 3
			i += 2
		}
	}
	return append(parts, raw[start:])
}

// decode decodes every %XX of a segment; false for a bad escape or NUL.
func decode(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 || hi == 0 && lo == 0 {
			return "", false
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	return b.String(), true
}
