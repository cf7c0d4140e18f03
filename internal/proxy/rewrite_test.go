package proxy

import (
	"strconv"
	"strings"
	"testing"

	"rlproxy/internal/config"
	"rlproxy/internal/reqview"
)

// TestPathRewrite: the path forwarded for a route's strip_prefix or
// rewrite. The nginx column is what nginx 1.22 sends for `location /api/ {
// proxy_pass http://app/p/; }` (ngx_http_proxy_create_request: the
// normalized path, re-escaped when the client's held a "%"); e2e's
// TestRewriteAgainstNginx checks it against a real nginx.
func TestPathRewrite(t *testing.T) {
	// Not parallel: AllocsPerRun.
	rewrite := newPathRewrite(&config.Route{Match: config.Match{PathPrefix: "/api/"}, Rewrite: "/p/"})
	strip := newPathRewrite(&config.Route{Match: config.Match{PathPrefix: "/api"}, StripPrefix: "/api"})
	for _, tc := range []struct{ raw, nginx, strip string }{
		{"/api/x", "/p/x", "/x"},
		{"/api/", "/p/", "/"},
		{"/api", "", "/"},
		{"/apix", "", "/x"},
		{"/api/./x", "/p/x", "/x"},
		{"/api//x", "/p/x", "/x"},
		{"/api/x/../y", "/p/y", "/y"},
		{"/api/%7Ex", "/p/~x", "/~x"},
		{"/api/a%2Fb", "/p/a/b", "/a/b"},
		{"/api%2Fx", "/p/x", "/x"},
		{"/api/a%20b%3F%23%25", "/p/a%20b%3F%23%25", "/a%20b%3F%23%25"},
		{"/api/%C3%A9", "/p/%C3%A9", "/%C3%A9"},
		{"/api/a;b=c,d@e:f", "/p/a;b=c,d@e:f", "/a;b=c,d@e:f"},
		{"/other", "", ""},
		{"/api/%zz", "", ""},
	} {
		got, ok := rewrite.apply(tc.raw)
		if got != tc.nginx || ok != (tc.nginx != "") {
			t.Errorf("rewrite %q = %q, %v; want %q", tc.raw, got, ok, tc.nginx)
		}
		got, ok = strip.apply(tc.raw)
		if got != tc.strip || ok != (tc.strip != "") {
			t.Errorf("strip_prefix %q = %q, %v; want %q", tc.raw, got, ok, tc.strip)
		}
	}
	if newPathRewrite(&config.Route{}) != nil {
		t.Error("a route without strip_prefix or rewrite has a path rewrite")
	}
	if n := testing.AllocsPerRun(100, func() { rewrite.apply("/api/v1/items/42") }); n != 1 {
		t.Errorf("rewriting a clean path allocates %v times, want 1 (the new path)", n)
	}
}

// FuzzPathRewrite: for any path reqview accepts, a rewritten path is a
// request-target path that cannot be read as another request — no space,
// control byte, "?" or "#", every "%" a valid escape — and unescaping it
// gives back exactly the replacement followed by the rest of the
// normalized path (nothing dropped, nothing decoded twice).
func FuzzPathRewrite(f *testing.F) {
	for _, s := range []string{"/api/x", "/api//x", "/api/%7Ex", "/api/a%2Fb", "/api%2F%3F%23%25%20x", "/api/./%2e%2e/y", "/api/\xc3\xa9%C3%A9", "/api"} {
		f.Add(s)
	}
	rws := []*pathRewrite{
		newPathRewrite(&config.Route{Match: config.Match{PathPrefix: "/api/"}, Rewrite: "/p/"}),
		newPathRewrite(&config.Route{Match: config.Match{PathPrefix: "/api"}, StripPrefix: "/api"}),
		newPathRewrite(&config.Route{Rewrite: "/"}),
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if raw == "" || raw[0] != '/' || strings.ContainsAny(raw, "?#\x7f") || strings.ContainsFunc(raw, func(r rune) bool { return r < 0x21 }) {
			return // not a path reqview passes on
		}
		norm, ok := reqview.Path(raw)
		if !ok {
			return
		}
		for _, rw := range rws {
			out, ok := rw.apply(raw)
			if !ok {
				continue
			}
			if strings.ContainsAny(out, "?# \x7f") || strings.ContainsFunc(out, func(r rune) bool { return r < 0x21 }) {
				t.Fatalf("%q → %q: holds a byte that ends or splits a request line", raw, out)
			}
			want := rw.put + strings.TrimPrefix(norm, rw.cut)
			if rw.strip && !strings.HasPrefix(want, "/") {
				want = "/" + want
			}
			got := out
			if strings.IndexByte(raw, '%') >= 0 {
				if got, ok = unescapeAll(out); !ok {
					t.Fatalf("%q → %q: a malformed escape", raw, out)
				}
			}
			if got != want {
				t.Fatalf("%q → %q, reads as %q, want %q", raw, out, got, want)
			}
		}
	})
}

// unescapeAll decodes every %XX of s; false for a malformed one.
func unescapeAll(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(n))
		i += 2
	}
	return b.String(), true
}

// TestOriginForm: an absolute-form target's path and query as sent.
func TestOriginForm(t *testing.T) {
	for in, want := range map[string]string{
		"/a?b": "/a?b", "http://h/a%22b?q": "/a%22b?q", "http://h:80": "/", "https://h?q=1": "/?q=1",
		"http://h/a\"b": "/a\"b", "": "",
	} {
		if got := originForm(in); got != want {
			t.Errorf("originForm(%q) = %q, want %q", in, got, want)
		}
	}
}
