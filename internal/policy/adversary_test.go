package policy

import "testing"

// TestMatchPath: every spelling an upstream may serve as /login matches as
// /login (a limited route could be bypassed otherwise), trailing slashes are
// kept so that path_prefix "/api/" still matches "/api/", and clean paths
// come back unchanged.
func TestMatchPath(t *testing.T) {
	// Not parallel: AllocsPerRun.
	for _, tc := range []struct{ in, want string }{
		{"/login", "/login"},
		{"//login", "/login"},
		{"///login//x", "/login/x"},
		{"/./login", "/login"},
		{"/x/../login", "/login"},
		{"/../login", "/login"},
		{"/login/../x", "/x"},
		{"/api/", "/api/"},
		{"/api//", "/api/"},
		{"/api/.", "/api/"},
		{"/api/x/..", "/api/"},
		{"/", "/"},
		{"//", "/"},
		{"/.", "/"},
		{"/.well-known/x", "/.well-known/x"},
		{"/a.b/c", "/a.b/c"},
		{"", ""},
	} {
		if got := MatchPath(tc.in); got != tc.want {
			t.Errorf("MatchPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { MatchPath("/api/v1/items/42") }); n != 0 {
		t.Errorf("MatchPath of a clean path allocates %v times, want 0", n)
	}
}
