package policy

import "testing"

// TestHostMatches: a leading "*." matches every name below the rest at any
// depth, case-insensitively, never the rest itself nor a name that merely
// ends with it (nginx server_name *.example.com); other patterns are exact.
func TestHostMatches(t *testing.T) {
	// Not parallel: AllocsPerRun.
	for _, tc := range []struct {
		host, pattern string
		want          bool
	}{
		{"a.example.com", "*.example.com", true},
		{"a.b.example.com", "*.example.com", true},
		{"A.EXAMPLE.COM", "*.example.com", true},
		{"example.com", "*.example.com", false},
		{"xexample.com", "*.example.com", false},
		{".example.com", "*.example.com", false},
		{"a.example.com.evil", "*.example.com", false},
		{"", "*.example.com", false},
		{"API.test", "api.test", true},
		{"a.api.test", "api.test", false},
		{"*.example.com", "*.example.com", true}, // reqview refuses no "*"; it is a label like another
	} {
		if got := hostMatches(tc.host, tc.pattern); got != tc.want {
			t.Errorf("hostMatches(%q, %q) = %v, want %v", tc.host, tc.pattern, got, tc.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { hostMatches("A.B.Example.com", "*.example.com") }); n != 0 {
		t.Errorf("hostMatches allocates %v times, want 0", n)
	}
}
