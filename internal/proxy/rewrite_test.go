package proxy

import (
	"testing"

	"rlproxy/internal/config"
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
