package policy

import (
	"testing"

	"rlproxy/internal/reqview"
)

// TestMatchPath: every spelling an upstream may serve as /login matches as
// /login (a limited route could be bypassed otherwise), trailing slashes are
// kept so that path_prefix "/api/" still matches "/api/", and clean paths
// come back unchanged. A path that climbs above the root ("/../login") was
// matched as /login; it is now refused (ok false, answered 400), as nginx
// refuses it: forwarded verbatim it reached upstreams that resolve it
// otherwise ("/../../etc/passwd").
func TestMatchPath(t *testing.T) {
	// Not parallel: AllocsPerRun.
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"/login", "/login", true},
		{"//login", "/login", true},
		{"///login//x", "/login/x", true},
		{"/./login", "/login", true},
		{"/x/../login", "/login", true},
		{"/../login", "", false},
		{"/login/../x", "/x", true},
		{"/api/", "/api/", true},
		{"/api//", "/api/", true},
		{"/api/.", "/api/", true},
		{"/api/x/..", "/api/", true},
		{"/", "/", true},
		{"//", "/", true},
		{"/.", "/", true},
		{"/.well-known/x", "/.well-known/x", true},
		{"/a.b/c", "/a.b/c", true},
		{"/admin%2Fx", "/admin/x", true},
		{"/%6cogin", "/login", true},
	} {
		if got, ok := reqview.Path(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("Path(%q) = %q, %v, want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	if n := testing.AllocsPerRun(100, func() { reqview.Path("/api/v1/items/42") }); n != 0 {
		t.Errorf("Path of a clean path allocates %v times, want 0", n)
	}
}
