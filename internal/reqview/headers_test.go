package reqview

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"testing"
)

// TestStdHeaders: lookups by any spelling of a name find net/http's
// canonical key; values come in order; Values and Each stop when told.
func TestStdHeaders(t *testing.T) {
	t.Parallel()
	h := StdHeaders{"X-Forwarded-For": {"1.2.3.4", "5.6.7.8"}, "Cookie": {"a=1"}, "Www-Authenticate": {"x"}}
	for _, name := range []string{"X-Forwarded-For", "x-forwarded-for", "X-FORWARDED-FOR", "x-Forwarded-fOR"} {
		if v, ok := h.Get(name); v != "1.2.3.4" || !ok {
			t.Errorf("Get(%q) = %q, %v; want 1.2.3.4, true", name, v, ok)
		}
		var got []string
		h.Values(name, func(v string) bool { got = append(got, v); return true })
		if !slices.Equal(got, []string{"1.2.3.4", "5.6.7.8"}) {
			t.Errorf("Values(%q) = %q", name, got)
		}
	}
	if v, ok := h.Get("WWW-Authenticate"); v != "x" || !ok {
		t.Errorf("Get(WWW-Authenticate) = %q, %v", v, ok)
	}
	for _, name := range []string{"Authorization", "authorization", "", "X_Forwarded_For"} {
		if v, ok := h.Get(name); v != "" || ok {
			t.Errorf("Get(%q) = %q, %v; want absent", name, v, ok)
		}
	}
	n := 0
	h.Values("X-Forwarded-For", func(string) bool { n++; return false })
	if n != 1 {
		t.Errorf("Values went on after false: %d calls", n)
	}
	fields := map[string][]string{}
	h.Each(func(k, v string) bool { fields[k] = append(fields[k], v); return true })
	if len(fields) != 3 || !slices.Equal(fields["X-Forwarded-For"], h["X-Forwarded-For"]) {
		t.Errorf("Each visited %v", fields)
	}
	n = 0
	h.Each(func(string, string) bool { n++; return false })
	if n != 1 {
		t.Errorf("Each went on after false: %d calls", n)
	}
}

// TestStdHeadersAllocs: a lookup by a canonical name, present or not,
// allocates nothing; nor does a Collector once warm.
func TestStdHeadersAllocs(t *testing.T) {
	h := Headers(StdHeaders{"X-Forwarded-For": {"1.2.3.4", "5.6.7.8"}, "Cookie": {"a=1"}})
	c := NewCollector()
	c.Values(h, "X-Forwarded-For")
	c.Fields(h)
	if n := testing.AllocsPerRun(100, func() {
		_, _ = h.Get("X-Forwarded-For")
		_, _ = h.Get("Authorization")
		if len(c.Values(h, "X-Forwarded-For")) != 2 || len(c.Fields(h)) != 3 {
			t.Fatal("collector lost values")
		}
		c.Release()
	}); n != 0 {
		t.Errorf("%v allocs, want 0", n)
	}
}

// TestCollectorRelease: a released Collector holds no request's strings,
// and one grown by a long header does not keep its slices.
func TestCollectorRelease(t *testing.T) {
	t.Parallel()
	c := NewCollector()
	if got := c.Values(StdHeaders{"A": {"x", "y"}}, "a"); !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("Values = %q", got)
	}
	c.Release()
	if slices.ContainsFunc(c.values[:cap(c.values)], func(s string) bool { return s != "" }) {
		t.Errorf("released collector keeps %q", c.values[:cap(c.values)])
	}
	long := make([]string, 100)
	c.Values(StdHeaders{"A": long}, "A")
	c.Release()
	if cap(c.values) != 0 {
		t.Errorf("released collector keeps %d entries' room", cap(c.values))
	}
}

// TestReadView: Read fills every field of the view from the request as
// received, without copying its headers.
func TestReadView(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("GET", "http://Api.Test:8080//a/./b?x=1&y", nil)
	r.RemoteAddr = "[2001:db8::7]:4711"
	r.TLS = &tls.ConnectionState{ServerName: "api.test"}
	r.Header.Set("X-Key", "k")
	v, reason := Read(r)
	want := View{
		Method: "GET", Host: "Api.Test", Path: "/a/b",
		Target: "http://Api.Test:8080//a/./b?x=1&y", RawPath: "//a/./b", Query: "x=1&y", RawHost: "Api.Test:8080",
		Proto: "HTTP/1.1", Peer: netip.MustParseAddrPort("[2001:db8::7]:4711"), TLS: r.TLS,
	}
	got := v
	got.Header = nil
	if reason != OK || got != want {
		t.Errorf("Read = %+v, %v\nwant %+v", got, reason, want)
	}
	r.Header.Set("X-Key", "changed") // the view reads the map in place
	if k, _ := v.Header.Get("x-key"); k != "changed" {
		t.Errorf("view's X-Key = %q, want the request's current value", k)
	}
	// A refused request still has its fields for the access log.
	bad := &http.Request{Method: "get", RequestURI: "/p?q", Host: "h", Proto: "HTTP/1.0", RemoteAddr: "192.0.2.1"}
	v, reason = Read(bad)
	if reason != BadMethod || v.RawPath != "/p" || v.Query != "q" || v.Proto != "HTTP/1.0" || v.Peer != netip.MustParseAddrPort("192.0.2.1:0") {
		t.Errorf("Read(bad method) = %+v, %v", v, reason)
	}
	v, reason = Read(httptest.NewRequest("GET", "http://h.test/../x?q", nil))
	if reason != BadPath || v.RawPath != "/../x" || v.Query != "q" {
		t.Errorf("Read(bad path) = %+v, %v; want raw path /../x", v, reason)
	}
}
