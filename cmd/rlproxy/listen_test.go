package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"rlproxy/internal/config"
	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/waitfor"
)

// shipped is the demo configuration (listen 127.0.0.1:8080, admin 127.0.0.1:9090).
var shipped = filepath.Join("..", "..", "configs", "rlproxy.yaml")

// TestListenPrecedence: validate shows the effective listeners and where
// they came from: flag over environment over file.
func TestListenPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name      string
		env       map[string]string
		flags     []string
		want      string
		wantError string
	}{
		{"file", nil, nil, "rlproxy: listen 127.0.0.1:8080 (file " + shipped + ":8), admin_listen 127.0.0.1:9090 (file " + shipped + ":9)\n", ""},
		{"env", map[string]string{"RLPROXY_LISTEN": "127.0.0.1:18081", "RLPROXY_ADMIN_LISTEN": ":19091"}, nil,
			"rlproxy: listen 127.0.0.1:18081 (environment RLPROXY_LISTEN), admin_listen :19091 (environment RLPROXY_ADMIN_LISTEN)\n", ""},
		{"flag over env", map[string]string{"RLPROXY_LISTEN": "127.0.0.1:18081", "RLPROXY_ADMIN_LISTEN": ":19091"},
			[]string{"-listen", "127.0.0.1:18080", "-admin-listen", ""},
			`rlproxy: listen 127.0.0.1:18080 (flag -listen), admin_listen "" (off) (flag -admin-listen)` + "\n", ""},
		{"empty env is unset", map[string]string{"RLPROXY_LISTEN": ""}, nil,
			"rlproxy: listen 127.0.0.1:8080 (file " + shipped + ":8), admin_listen 127.0.0.1:9090 (file " + shipped + ":9)\n", ""},
		{"bad flag", nil, []string{"-listen", "18080"}, "",
			`flag -listen: listen: "18080": want HOST:PORT, e.g. 127.0.0.1:8080 or :8080`},
		{"bad env", map[string]string{"RLPROXY_ADMIN_LISTEN": "127.0.0.1:8080"}, nil, "",
			`environment RLPROXY_ADMIN_LISTEN: admin_listen: "127.0.0.1:8080": must not share the public listener "127.0.0.1:8080" (metrics and health stay off the public port)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("RLPROXY_LISTEN", "")
			t.Setenv("RLPROXY_ADMIN_LISTEN", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			code, stdout, stderr := mainRun(append([]string{"validate", "-config", shipped}, tc.flags...)...)
			if tc.wantError != "" {
				if code != 1 || !strings.HasPrefix(stderr, tc.wantError+"\n") {
					t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and:\n%s", code, stderr, tc.wantError)
				}
				return
			}
			if code != 0 || stderr != tc.want || stdout != "rlproxy: configuration file "+shipped+" test is successful\n" {
				t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit 0 and:\n%s", code, stdout, stderr, tc.want)
			}
		})
	}
}

// TestListenDefaultSource: a listener the file leaves out is labelled
// "default", not as the file's.
func TestListenDefaultSource(t *testing.T) {
	t.Setenv("RLPROXY_LISTEN", "")
	t.Setenv("RLPROXY_ADMIN_LISTEN", "")
	p := mainWrite(t, "defaults.yaml", "admin_listen: \"127.0.0.1:19090\"\nupstreams: { app: { builtin: echo } }\nroutes: [{ name: r, upstream: app }]\n")
	code, _, stderr := mainRun("validate", p)
	if want := "rlproxy: listen :8080 (default), admin_listen 127.0.0.1:19090 (file " + p + ":1)\n"; code != 0 || stderr != want {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 0 and:\n%s", code, stderr, want)
	}
}

// TestSchemaCommand: `rlproxy schema` prints config.Schema(), the file
// docs/rlproxy.schema.json holds.
func TestSchemaCommand(t *testing.T) {
	code, stdout, stderr := mainRun("schema")
	if code != 0 || stderr != "" || stdout != string(config.Schema()) {
		t.Errorf("exit %d, stderr %q, stdout %d bytes; want exit 0 and config.Schema()", code, stderr, len(stdout))
	}
	if code, _, _ := mainRun("schema", "x"); code != 2 {
		t.Errorf("schema x: exit %d, want 2", code)
	}
}

// buildBinary builds rlproxy into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rlproxy")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startBinary runs bin with args and env and stops it (SIGTERM) at the
// end of the test, checking it exits 0.
func startBinary(t *testing.T, bin string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var log bytes.Buffer
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("rlproxy exit: %v; log:\n%s", err, log.String())
		}
	})
}

// get polls url until it answers (up to 10 s: the binary is starting) and
// returns its status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	var (
		resp *http.Response
		err  error
	)
	if !waitfor.Poll(10*time.Second, func() bool { resp, err = http.Get(url); return err == nil }) {
		t.Fatalf("GET %s: %v", url, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(body)
}

// TestServeListenFlag runs the real binary: `rlproxy -listen ADDR -config
// configs/rlproxy.yaml` serves on ADDR (the flag beating RLPROXY_LISTEN),
// the admin listener where RLPROXY_ADMIN_LISTEN says; with -listen "" only
// the admin listener runs (decision-service mode).
func TestServeListenFlag(t *testing.T) {
	bin := buildBinary(t)
	public, admin, envPublic := netutil.FreeAddr(t), netutil.FreeAddr(t), netutil.FreeAddr(t)
	startBinary(t, bin, []string{"RLPROXY_LISTEN=" + envPublic, "RLPROXY_ADMIN_LISTEN=" + admin},
		"-listen", public, "-config", shipped)
	if code, body := get(t, "http://"+public+"/api/x"); code != 200 || !strings.Contains(body, "/api/x") {
		t.Errorf("GET %s/api/x: %d %q; want 200 from the echo upstream", public, code, body)
	}
	if code, _ := get(t, "http://"+admin+"/healthz"); code != 200 {
		t.Errorf("admin /healthz: %d", code)
	}
	if resp, err := http.Get("http://" + envPublic + "/"); err == nil {
		resp.Body.Close()
		t.Errorf("%s (RLPROXY_LISTEN) answers; the flag should have won", envPublic)
	}

	admin2 := netutil.FreeAddr(t)
	startBinary(t, bin, nil, "-listen", "", "-admin-listen", admin2, "-config", shipped)
	if code, _ := get(t, "http://"+admin2+"/readyz"); code != 200 {
		t.Errorf("decision-service mode: admin /readyz %d, want 200", code)
	}
}
