package deploy_test

// The release and service kit: the GoReleaser config and the systemd unit,
// each checked by the tool that will use it.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// needTool returns the path of a command, or skips the test, the reason
// also printed on stderr (seen under -v and when go test runs in deploy/
// without arguments) — failing instead when RLPROXY_REQUIRE_TOOLS=1
// (scripts/test.sh, CI), so a missing install step cannot pass silently.
func needTool(t *testing.T, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("RLPROXY_REQUIRE_TOOLS") == "1" {
		t.Fatalf("%s not found (%s)", name, install)
	}
	fmt.Fprintf(os.Stderr, "SKIP %s: %s not on PATH, this test did NOT run (install: %s)\n", t.Name(), name, install)
	t.Skipf("%s not found (%s)", name, install)
	return ""
}

// TestGoreleaser: `goreleaser check` accepts .goreleaser.yaml, and it builds
// the four static binaries the reference promises, version-stamped.
func TestGoreleaser(t *testing.T) {
	var cfg struct {
		Version  int `yaml:"version"`
		Archives []struct {
			Files []string `yaml:"files"`
		} `yaml:"archives"`
		Builds []struct {
			Main    string   `yaml:"main"`
			Env     []string `yaml:"env"`
			Ldflags []string `yaml:"ldflags"`
			Goos    []string `yaml:"goos"`
			Goarch  []string `yaml:"goarch"`
		} `yaml:"builds"`
	}
	decode(t, "../.goreleaser.yaml", &cfg)
	if cfg.Version != 2 || len(cfg.Builds) != 1 {
		t.Fatalf("version %d, %d builds: want a v2 config with one build", cfg.Version, len(cfg.Builds))
	}
	// The example configs name ../docs/rlproxy.schema.json: the archive
	// ships it beside them.
	for _, a := range cfg.Archives {
		if !slices.Contains(a.Files, "docs/rlproxy.schema.json") || !slices.Contains(a.Files, "configs/*.yaml") {
			t.Errorf("archive files %q: want configs/*.yaml and the schema they name, docs/rlproxy.schema.json", a.Files)
		}
	}
	b := cfg.Builds[0]
	if b.Main != "./cmd/rlproxy" || !slices.Contains(b.Env, "CGO_ENABLED=0") ||
		!slices.Equal(b.Goos, []string{"linux", "darwin"}) || !slices.Equal(b.Goarch, []string{"amd64", "arm64"}) {
		t.Errorf("build %+v: want static ./cmd/rlproxy for linux, darwin × amd64, arm64", b)
	}
	ld := strings.Join(b.Ldflags, " ")
	for _, v := range []string{"main.version=", "main.commit=", "main.date="} {
		if !strings.Contains(ld, "-X "+v) {
			t.Errorf("ldflags %q do not stamp %s", ld, v)
		}
	}
	bin := needTool(t, "goreleaser", "go install github.com/goreleaser/goreleaser/v2@v2.15.1")
	cmd := exec.Command(bin, "check")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("goreleaser check: %v\n%s", err, out)
	}
}

// TestSystemdUnit: systemd-analyze accepts the unit (with ExecStart pointed
// at a real binary, as on an installed host), and the hardening the reference
// describes is there.
func TestSystemdUnit(t *testing.T) {
	const unit = "systemd/rlproxy.service"
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, want := range []string{
		"DynamicUser=yes", "ProtectSystem=strict", "NoNewPrivileges=yes", "ExecReload=/bin/kill -HUP $MAINPID",
		"CapabilityBoundingSet=\n", "ExecStart=/usr/local/bin/rlproxy -config /etc/rlproxy/rlproxy.yaml",
		"StateDirectory=rlproxy\n", "LogsDirectory=rlproxy\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q", unit, want)
		}
	}
	analyze := needTool(t, "systemd-analyze", "apt-get install systemd")
	dir := t.TempDir()
	bin := filepath.Join(dir, "rlproxy")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(dir, "rlproxy.service")
	if err := os.WriteFile(local, []byte(strings.ReplaceAll(text, "/usr/local/bin/rlproxy", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", local).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
