package netutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestPickClaims: a picked port lies below the ephemeral range (where no
// outgoing connection takes it), another pick in this process cannot
// claim it, nor can another process while this one lives; 500 picks are
// all different.
func TestPickClaims(t *testing.T) {
	if os.Getenv("NETUTIL_CLAIM_PORT") != "" { // the child of this test
		port, _ := strconv.Atoi(os.Getenv("NETUTIL_CLAIM_PORT"))
		if claim(filepath.Join(os.TempDir(), "rlproxy-test-ports"), port) {
			os.Exit(3)
		}
		os.Exit(0)
	}
	a, err := pick()
	if err != nil {
		t.Fatal(err)
	}
	if a.Port < pickLow || a.Port >= ephemeralLow() {
		t.Errorf("picked %d, want within [%d, %d)", a.Port, pickLow, ephemeralLow())
	}
	if claim(filepath.Join(os.TempDir(), "rlproxy-test-ports"), a.Port) {
		t.Errorf("port %d claimed twice in one process", a.Port)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPickClaims$")
	cmd.Env = append(os.Environ(), "NETUTIL_CLAIM_PORT="+strconv.Itoa(a.Port))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("another process claimed port %d while this one holds it (%v):\n%s", a.Port, err, out)
	}
	seen := map[int]bool{a.Port: true}
	for range 500 {
		b, err := pick()
		if err != nil {
			t.Fatal(err)
		}
		if seen[b.Port] {
			t.Fatalf("port %d picked twice", b.Port)
		}
		seen[b.Port] = true
	}
}
