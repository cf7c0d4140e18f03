package nginxtest_test

import (
	"io"
	"net/http"
	"testing"

	"rlproxy/internal/testutil/nginxtest"
)

// TestStart runs nginx with a fixed answer and reads it back; a second
// Stop does nothing.
func TestStart(t *testing.T) {
	s := nginxtest.Start(t, `server { listen {{listen}}; location / { return 200 "hello from {{dir}}"; } }`)
	resp, err := http.Get(s.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "hello from "+s.Dir {
		t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, b, "hello from "+s.Dir)
	}
	s.Stop()
	s.Stop()
	if _, err := http.Get(s.URL + "/"); err == nil {
		t.Fatal("nginx still answers after Stop")
	}
}
