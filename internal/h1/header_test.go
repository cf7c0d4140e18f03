package h1

import (
	"slices"
	"testing"
)

// headers is reqview.Headers' method set: Request provides it.
type headers interface {
	Get(name string) (string, bool)
	Values(name string, fn func(string) bool)
	Each(fn func(name, value string) bool)
}

var _ headers = (*Request)(nil)

// TestHeaderLookup: names compare ASCII case-insensitively, values come
// in order without the whitespace around them, fn stops the walk.
func TestHeaderLookup(t *testing.T) {
	raw := "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 1.1.1.1 \r\nx-forwarded-for:\t2.2.2.2, 3.3.3.3\r\nX-Empty:\r\nX-FORWARDED-FOR: 4.4.4.4\r\n\r\n"
	var r Request
	if _, why := ParseRequest([]byte(raw), &r, Limits{}); why != OK {
		t.Fatal(why)
	}
	var h headers = &r
	if v, ok := h.Get("X-FORWARDED-for"); !ok || v != "1.1.1.1" {
		t.Fatalf("Get: %q %v", v, ok)
	}
	if v, ok := h.Get("X-Empty"); !ok || v != "" {
		t.Fatalf("Get empty: %q %v", v, ok)
	}
	if _, ok := h.Get("X-Forwarded"); ok {
		t.Fatal("Get matched a prefix")
	}
	var vals []string
	h.Values("x-forwarded-for", func(v string) bool { vals = append(vals, v); return len(vals) < 2 })
	if !slices.Equal(vals, []string{"1.1.1.1", "2.2.2.2, 3.3.3.3"}) {
		t.Fatalf("Values: %q", vals)
	}
	var names []string
	h.Each(func(name, value string) bool { names = append(names, name+"="+value); return true })
	want := []string{"Host=a", "X-Forwarded-For=1.1.1.1", "x-forwarded-for=2.2.2.2, 3.3.3.3", "X-Empty=", "X-FORWARDED-FOR=4.4.4.4"}
	if !slices.Equal(names, want) {
		t.Fatalf("Each: %q", names)
	}
	if r.Method() != "GET" || r.Target() != "/" || r.Proto() != "HTTP/1.1" || r.Host() != "a" {
		t.Fatalf("line %q %q %q %q", r.Method(), r.Target(), r.Proto(), r.Host())
	}
}
