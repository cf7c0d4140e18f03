package forwardauth

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"rlproxy/internal/reqview"
)

// TestDescribedView: the described request's view carries the original's
// method, target and host from the forwarding headers, the caller's peer,
// and every header field but those describing the original, read in any
// spelling.
func TestDescribedView(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("GET", "/auth", nil)
	r.RemoteAddr = "10.0.0.5:4000"
	r.Header.Set("X-Forwarded-Method", "POST")
	r.Header.Set("X-Forwarded-Uri", "//login/../api?k=1")
	r.Header.Set("X-Forwarded-Host", "api.test:8443, proxy.test")
	r.Header.Set("X-Original-Uri", "/ignored")
	r.Header.Set("X-Api-Key", "secret")
	v, ans, ok := described(r)
	if !ok {
		t.Fatal("not described")
	}
	if reason := reqview.Check(&v, r); reason != reqview.OK {
		t.Fatalf("Check: %v", reason)
	}
	if v.Method != "POST" || v.Target != "//login/../api?k=1" || v.Path != "/api" || v.Query != "k=1" ||
		v.RawHost != "api.test:8443" || v.Host != "api.test" || v.Peer != netip.MustParseAddrPort("10.0.0.5:4000") {
		t.Errorf("view %+v", v)
	}
	if ans.Method != "POST" || ans.URL.Path != "//login/../api" || r.Method != "GET" {
		t.Errorf("answer request %s %s (caller's %s)", ans.Method, ans.URL.Path, r.Method)
	}
	for _, name := range []string{"X-Forwarded-Method", "x-forwarded-uri", "X-FORWARDED-HOST", "X-Original-URI"} {
		if got, present := v.Header.Get(name); present {
			t.Errorf("%s = %q in the original's headers", name, got)
		}
		v.Header.Values(name, func(s string) bool { t.Errorf("%s value %q", name, s); return true })
	}
	if k, _ := v.Header.Get("x-api-key"); k != "secret" {
		t.Errorf("X-Api-Key = %q", k)
	}
	n := 0
	v.Header.Each(func(name, _ string) bool {
		if describing(name) {
			t.Errorf("Each visits %s", name)
		}
		n++
		return true
	})
	if n != 1 {
		t.Errorf("Each visited %d fields, want 1 (X-Api-Key)", n)
	}
}
