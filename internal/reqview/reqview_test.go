package reqview

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestPath holds nginx 1.22's normalization (ngx_http_parse_complex_uri
// with merge_slashes on) for each of its rules: the values are what nginx
// gives, checked against a real nginx by the e2e differential test.
func TestPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"/login", "/login", true},
		{"/a//b///c", "/a/b/c", true},
		{"/a/./b/.", "/a/b/", true},
		{"/a/b/../c", "/a/c", true},
		{"/a/b/..", "/a/", true},
		{"/a/...", "/a/...", true},
		{"/a./b", "/a./b", true},
		{"/a/..b", "/a/..b", true},
		{"/..", "", false},
		{"/../../etc/passwd", "", false},
		{"/%2e%2e/%2e%2e/etc/passwd", "", false},
		{"/a/%2E%2e/%2e./b", "", false},
		{"/a/%2e%2e/b", "/b", true},
		{"/admin%2Fx", "/admin/x", true},
		{"/admin%2f%2fx", "/admin/x", true},
		{"/a%2f..%2fadmin", "/admin", true},
		{"/a/.%2e", "/", true},
		{"/%6c%6F%67in", "/login", true},
		{"/a%3Fb", "/a?b", true},
		{"/a%23b", "/a#b", true},
		{"/a%25b", "/a%b", true},
		{"/a%252e", "/a%2e", true},
		{"/%3F/../x", "/x", true},
		{"/%25/../x", "/x", true},
		{"/a%20b", "/a b", true},
		{"/a%00b", "", false},
		{"/a%", "", false},
		{"/a%2", "", false},
		{"/a%zz", "", false},
		{"/a%2g", "", false},
		{"/a%C3%A9", "/a\u00e9", true},
	} {
		if got, ok := Path(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("Path(%q) = %q, %v, want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestHost holds ngx_http_validate_host's rules.
func TestHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"api.test", "api.test", true},
		{"API.Test", "API.Test", true},
		{"api.test.", "api.test", true},
		{"api.test.:8080", "api.test", true},
		{"api.test:8080", "api.test", true},
		{"[::1]:80", "[::1]", true},
		{"[::1]", "[::1]", true},
		{"api..test", "", false},
		{"api.test..", "", false},
		{".", "", false},
		{":80", "", false},
		{"a/b", "", false},
		{"a b", "", false},
		{"a\x7fb", "", false},
	} {
		if got, ok := Host(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("Host(%q) = %q, %v, want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestRead: each form of request nginx refuses gets its reason, and the
// forms it serves their view.
func TestRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, method, target, host string
		header                     http.Header
		want                       Reason
		path, vhost                string
	}{
		{name: "origin", method: "GET", target: "/a/../b?x=/../..", host: "API.test.:80", want: OK, path: "/b", vhost: "API.test"},
		{name: "absolute", method: "GET", target: "http://api.test:80/a//b?q", host: "api.test:80", want: OK, path: "/a/b", vhost: "api.test"},
		{name: "absolute no path", method: "GET", target: "http://api.test", host: "api.test", want: OK, path: "/", vhost: "api.test"},
		{name: "absolute query only", method: "GET", target: "https://api.test?x", host: "api.test", want: OK, path: "/", vhost: "api.test"},
		{name: "ip literal", method: "GET", target: "/", host: "[::1]:8080", want: OK, path: "/", vhost: "::1"},
		{name: "no host", method: "GET", target: "/", host: "", want: OK, path: "/"},
		{name: "extension method", method: "M-SEARCH", target: "/", host: "a", want: OK, path: "/", vhost: "a"},
		{name: "lower-case method", method: "post", target: "/login", host: "a", want: BadMethod},
		{name: "mixed-case method", method: "Get", target: "/", host: "a", want: BadMethod},
		{name: "method with space", method: "G T", target: "/", host: "a", want: BadMethod},
		{name: "method with digit", method: "GET2", target: "/", host: "a", want: BadMethod},
		{name: "method with dot", method: "P.OST", target: "/", host: "a", want: BadMethod},
		{name: "method with underscore", method: "MY_METHOD", target: "/", host: "a", want: OK, path: "/", vhost: "a"},
		{name: "empty method", method: "", target: "/", host: "a", want: BadMethod},
		{name: "scheme without authority", method: "GET", target: "x:admin/x", host: "a", want: BadTarget},
		{name: "scheme only", method: "GET", target: "a:admin", host: "a", want: BadTarget},
		{name: "authority form", method: "GET", target: "other.test:80", host: "a", want: BadTarget},
		{name: "asterisk", method: "OPTIONS", target: "*", host: "a", want: BadTarget},
		{name: "userinfo", method: "GET", target: "http://user:pw@host/", host: "host", want: BadTarget},
		{name: "userinfo no password", method: "GET", target: "http://user@host/", host: "host", want: BadTarget},
		{name: "empty authority", method: "GET", target: "http:///x", host: "a", want: BadTarget},
		{name: "space", method: "GET", target: "/exact HTTP/1.0", host: "a", want: BadTarget},
		{name: "tab", method: "GET", target: "/a\tb", host: "a", want: BadTarget},
		{name: "control byte", method: "GET", target: "/a\x01b", host: "a", want: BadTarget},
		{name: "DEL", method: "GET", target: "/a\x7f", host: "a", want: BadTarget},
		{name: "fragment", method: "GET", target: "/public#/../admin", host: "a", want: BadTarget},
		{name: "relative", method: "GET", target: "admin/x", host: "a", want: BadTarget},
		{name: "empty target", method: "GET", target: "", host: "a", want: BadTarget},
		{name: "above root", method: "GET", target: "/../../etc/passwd", host: "a", want: BadPath},
		{name: "NUL escape", method: "GET", target: "/a%00", host: "a", want: BadPath},
		{name: "bad escape", method: "GET", target: "/a%zz", host: "a", want: BadPath},
		{name: "bad host", method: "GET", target: "/", host: "a..b", want: BadHost},
		{name: "connect authority", method: "CONNECT", target: "other.test:443", host: "other.test:443", want: OK, vhost: "other.test"},
		{name: "bad content-length", method: "POST", target: "/", host: "a", header: http.Header{"Content-Length": {"abc"}}, want: BadContentLength},
		{name: "signed content-length", method: "POST", target: "/", host: "a", header: http.Header{"Content-Length": {"+5"}}, want: BadContentLength},
		{name: "two content-lengths", method: "POST", target: "/", host: "a", header: http.Header{"Content-Length": {"5", "6"}}, want: BadContentLength},
		{name: "same content-lengths", method: "POST", target: "/", host: "a", header: http.Header{"Content-Length": {"5", "5"}}, want: OK, path: "/", vhost: "a"},
		{name: "two authorizations", method: "GET", target: "/", host: "a", header: http.Header{"Authorization": {"Bearer decoy", "Bearer real"}}, want: DuplicateCredential},
	} {
		r := &http.Request{Method: tc.method, RequestURI: tc.target, Host: tc.host, Header: tc.header, ProtoMajor: 2}
		v, got := Read(r)
		if got != tc.want {
			t.Errorf("%s: Read(%s %q) = %q, want %q", tc.name, tc.method, tc.target, got, tc.want)
			continue
		}
		if got == OK && (v.Path != tc.path || v.Host != tc.vhost || v.Method != tc.method) {
			t.Errorf("%s: Read(%s %q) = %+v, want path %q host %q", tc.name, tc.method, tc.target, v, tc.path, tc.vhost)
		}
	}
}

// TestReadEmptyHost: an HTTP/1.1 request whose Host field is empty is
// refused (net/http refuses one without Host itself); HTTP/1.0 may have
// none, and HTTP/2 may carry the host in :authority alone.
func TestReadEmptyHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		major, minor int
		want         Reason
	}{{1, 1, BadHost}, {1, 0, OK}, {2, 0, OK}} {
		r := &http.Request{Method: "GET", RequestURI: "/", ProtoMajor: tc.major, ProtoMinor: tc.minor}
		if _, got := Read(r); got != tc.want {
			t.Errorf("HTTP/%d.%d without host: %q, want %q", tc.major, tc.minor, got, tc.want)
		}
	}
}

// TestReadAllocs: reading a request with a clean path allocates nothing.
func TestReadAllocs(t *testing.T) {
	r := httptest.NewRequest("POST", "/api/v1/items/42?x=1", nil)
	r.Host = "Api.Test:8080"
	r.Header.Set("Authorization", "Bearer x")
	r.Header.Set("Content-Length", "0")
	if n := testing.AllocsPerRun(100, func() {
		if _, reason := Read(r); reason != OK {
			t.Fatal(reason)
		}
	}); n != 0 {
		t.Errorf("Read allocates %v times, want 0", n)
	}
}

// TestReasonNames: every reason has its metric label, distinct.
func TestReasonNames(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for r := OK + 1; r < NumReasons; r++ {
		if s := r.String(); s == "" || seen[s] {
			t.Errorf("reason %d: label %q empty or repeated", r, s)
		}
		seen[r.String()] = true
	}
}
