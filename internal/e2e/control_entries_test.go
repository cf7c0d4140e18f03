package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"rlproxy/internal/control"
	"rlproxy/internal/testutil/rlproxytest"
)

// TestControlEntriesIdempotentPost: over the admin listener, with each
// store, a POST of an entry identical to an applied one answers 200 with
// that entry (same id and Location), so two identical POSTs leave exactly
// one entry listed; a DELETE with a body still needs Content-Type:
// application/json (415), one without a body needs no Content-Type.
func TestControlEntriesIdempotentPost(t *testing.T) {
	for _, st := range []string{"memory", "valkey"} {
		t.Run(st, func(t *testing.T) {
			const pw = "correct horse battery"
			t.Setenv("RLPROXY_E2E_ADMIN_PW", pw)
			auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:"+pw))
			up := rlproxytest.NewUpstream(t)
			in := rlproxytest.Start(t, storeYAML(t, st)+fmt.Sprintf(adminEntriesCfg, up.URL))
			base := in.AdminURL + "/api/entries"
			send := func(method, url, body string, hdr ...string) (int, string, http.Header) {
				t.Helper()
				resp, b := rlproxytest.Do(t, nil, method, url, body, append([]string{"Authorization", auth}, hdr...)...)
				return resp.StatusCode, b, resp.Header
			}
			ban := `{"policy":"api","source":"ip","key":"127.0.0.6","action":"ban","expires_in":"1h","reason":"e2e"}`
			json1 := []string{"Content-Type", "application/json"}
			var first, again control.Entry
			status, body, h := send(http.MethodPost, base, ban, json1...)
			if err := json.Unmarshal([]byte(body), &first); err != nil || status != http.StatusCreated {
				t.Fatalf("first POST: %d %s", status, body)
			}
			loc := h.Get("Location")
			status, body, h = send(http.MethodPost, base, ban, json1...)
			if err := json.Unmarshal([]byte(body), &again); err != nil || status != http.StatusOK || again.ID != first.ID || h.Get("Location") != loc {
				t.Fatalf("identical POST: %d %s Location %q; want 200, entry %s, Location %q", status, body, h.Get("Location"), first.ID, loc)
			}
			if n := listed(t, send, base); n != 1 {
				t.Fatalf("after two identical POSTs: %d entries listed, want 1", n)
			}
			if status, body, _ = send(http.MethodDelete, base+"/"+first.ID, "{}"); status != http.StatusUnsupportedMediaType {
				t.Fatalf("DELETE with a body and no Content-Type: %d %s, want 415", status, body)
			}
			if status, body, _ = send(http.MethodDelete, base+"/"+first.ID, ""); status != http.StatusOK || !strings.Contains(body, `"id":"`+first.ID+`"`) {
				t.Fatalf("DELETE without a body or Content-Type: %d %s, want 200 and the entry", status, body)
			}
			if n := listed(t, send, base); n != 0 {
				t.Fatalf("after the DELETE: %d entries listed, want 0", n)
			}
		})
	}
}

// listed counts the entries GET /api/entries lists (one page).
func listed(t *testing.T, send func(method, url, body string, hdr ...string) (int, string, http.Header), base string) int {
	t.Helper()
	status, body, _ := send(http.MethodGet, base, "")
	var page struct {
		Entries []control.Entry `json:"entries"`
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil || status != http.StatusOK {
		t.Fatalf("GET /api/entries: %d %s", status, body)
	}
	return len(page.Entries)
}
