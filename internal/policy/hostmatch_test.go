package policy

import (
	"testing"

	"rlproxy/internal/config"
	"rlproxy/internal/reqview"
	"rlproxy/internal/store/memory"
)

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

// TestMatchWildcardFirstMatch: a wildcard host is one more condition of
// a route, and routes stay first-match in file order: an exact host
// listed before the wildcard takes its name, one listed after it is
// shadowed (unlike nginx's server_name, where an exact name always wins:
// order the routes so).
func TestMatchWildcardFirstMatch(t *testing.T) {
	cfg, err := config.ParseWith("x.yaml", []byte(`
upstreams: { app: { builtin: echo } }
routes:
  - { name: admin, match: { host: admin.example.com }, upstream: app }
  - { name: wild, match: { host: "*.example.com" }, upstream: app }
  - { name: shadowed, match: { host: api.example.com }, upstream: app }
  - { name: rest, upstream: app }
`), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(cfg, Options{Store: memory.New(memory.Options{SweepInterval: -1})})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]string{
		"ADMIN.example.com": "admin", "api.example.com": "wild", "a.admin.example.com": "wild",
		"example.com": "rest", "xexample.com": "rest", "": "rest",
	} {
		if got := l.Match(&reqview.View{Method: "GET", Host: host, Path: "/"}); got == nil || got.Name != want {
			t.Errorf("Host %q: route %v, want %s", host, got, want)
		}
	}
}
