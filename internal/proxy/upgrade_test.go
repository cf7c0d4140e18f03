package proxy

import (
	"net/http"
	"slices"
	"testing"
)

// TestUpgradeScreen: only the route's protocols stay in Upgrade (names any
// case, a bare name at any version, name/version exactly); h2c and every
// other protocol are dropped, and the client's request is never changed.
func TestUpgradeScreen(t *testing.T) {
	allow := upgrades{"websocket", "tcp", "spdy/3.1"}
	for _, c := range []struct {
		in   []string
		want []string // nil: no Upgrade field left
		same bool     // r itself comes back
	}{
		{in: []string{"websocket"}, want: []string{"websocket"}, same: true},
		{in: []string{"WebSocket"}, want: []string{"WebSocket"}, same: true},
		{in: []string{"tcp/1"}, want: []string{"tcp/1"}, same: true},
		{in: []string{"SPDY/3.1"}, want: []string{"SPDY/3.1"}, same: true},
		{in: []string{"spdy/3"}},
		{in: []string{"spdy"}},
		{in: []string{"h2c"}},
		{in: []string{"H2C"}},
		{in: []string{"websocket2"}},
		{in: []string{"h2c, websocket"}, want: []string{"websocket"}},
		{in: []string{"h2c", " tcp ,,foo"}, want: []string{"tcp"}},
		{in: []string{"w\xe9bsocket"}},
	} {
		r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
		r.Header["Upgrade"] = slices.Clone(c.in)
		r.Header["Http2-Settings"] = []string{"AAMAAABkAARAAAAAAAIAAAAA"}
		got := allow.screen(r)
		if (got == r) != c.same {
			t.Errorf("%q: returned the same request %v, want %v", c.in, got == r, c.same)
		}
		if !slices.Equal(got.Header["Upgrade"], c.want) {
			t.Errorf("%q: Upgrade %q, want %q", c.in, got.Header["Upgrade"], c.want)
		}
		if !slices.Equal(r.Header["Upgrade"], c.in) {
			t.Errorf("%q: the client's request changed to %q", c.in, r.Header["Upgrade"])
		}
	}
	r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	r.Header["Upgrade"] = []string{"websocket"}
	if got := (upgrades{}).screen(r); got.Header["Upgrade"] != nil {
		t.Errorf("upgrades []: Upgrade %q kept, want none", got.Header["Upgrade"])
	}
}
