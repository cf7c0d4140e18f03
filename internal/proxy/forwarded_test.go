package proxy

import (
	"net/http"
	"slices"
	"testing"
)

// TestDropForwardingAliases: the "_" spellings of the forwarding fields go,
// in any case; other fields, with "_" or not, stay; no allocation.
func TestDropForwardingAliases(t *testing.T) {
	h := http.Header{
		"X_real_ip": {"1"}, "X_REAL_IP": {"2"}, "X_forwarded_for": {"3"}, "X_forwarded_host": {"4"},
		"X_forwarded_proto": {"5"}, "X_forwarded": {"6"}, "X-Real_ip": {"7"},
		"X_under": {"a"}, "X_real_ips": {"b"}, "X-Forwarded-For": {"c"}, "Accept": {"d"},
	}
	dropForwardingAliases(h)
	var left []string
	for k := range h {
		left = append(left, k)
	}
	slices.Sort(left)
	if want := []string{"Accept", "X-Forwarded-For", "X_real_ips", "X_under"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
	typical := http.Header{"Accept": {"*/*"}, "User-Agent": {"x"}, "Accept-Encoding": {"gzip"}, "X_under": {"a"}}
	if n := testing.AllocsPerRun(100, func() { dropForwardingAliases(typical) }); n != 0 {
		t.Errorf("allocates %v times, want 0", n)
	}
}

func BenchmarkDropForwardingAliases(b *testing.B) {
	h := http.Header{"Accept": {"*/*"}, "User-Agent": {"x"}, "Accept-Encoding": {"gzip"}, "Cookie": {"a=1"},
		"Content-Type": {"text/plain"}, "Content-Length": {"2"}, "X-Request-Id": {"1"}, "Authorization": {"Bearer x"}}
	for b.Loop() {
		dropForwardingAliases(h)
	}
}
