// Package deploy_test checks the container deployment without a Docker
// engine: the compose file's references resolve, the Dockerfile builds a
// static non-root image the way the compose file expects, and (once
// cmd/rlproxy builds) the binary built with the Dockerfile's flags accepts
// the compose config and answers the compose health check.
package deploy_test

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"rlproxy/internal/config"
	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/redisserver"
	"rlproxy/internal/testutil/waitfor"
)

// Paths relative to this package's directory (deploy/), where go test runs.
const (
	repoRoot    = ".."
	composeFile = "docker-compose.yaml"
	configDir   = "compose"
	configFile  = configDir + "/rlproxy.yaml"
	dockerfile  = "../Dockerfile"
	ignoreFile  = "../.dockerignore"
)

type compose struct {
	Services map[string]service `yaml:"services"`
}

type service struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string            `yaml:"context"`
		Dockerfile string            `yaml:"dockerfile"`
		Args       map[string]string `yaml:"args"`
	} `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

// proxyConfig is the part of the rlproxy config the deployment depends on.
type proxyConfig struct {
	Listen      string `yaml:"listen"`
	AdminListen string `yaml:"admin_listen"`
	Store       struct {
		Type   string `yaml:"type"`
		Valkey struct {
			Addrs []string `yaml:"addrs"`
		} `yaml:"valkey"`
	} `yaml:"store"`
	Upstreams map[string]struct {
		URL string `yaml:"url"`
	} `yaml:"upstreams"`
}

func decode(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %s: %v", file, err)
	}
}

// instruction is one Dockerfile line: the keyword and its arguments.
type instruction struct {
	cmd, args string
}

// parseDockerfile returns the instructions of each stage (comments and
// line continuations handled; enough for our own Dockerfile).
func parseDockerfile(t *testing.T) [][]instruction {
	t.Helper()
	f, err := os.Open(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages [][]instruction
	var cont string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		if l, ok := strings.CutSuffix(line, "\\"); ok {
			cont += l + " "
			continue
		}
		line, cont = cont+line, ""
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{strings.ToUpper(cmd), strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("%s: %q before FROM", dockerfile, line)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

func find(stage []instruction, cmd string) []string {
	var out []string
	for _, in := range stage {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// execForm decodes a JSON-array instruction argument (ENTRYPOINT, CMD).
func execForm(t *testing.T, args string) []string {
	t.Helper()
	var v []string
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		t.Fatalf("%q is not exec form (a JSON array; distroless has no shell): %v", args, err)
	}
	return v
}

// buildRE is the Dockerfile's build command; TestBinaryRunsComposeConfig
// builds with the same flags.
var buildRE = regexp.MustCompile(`^CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main\.version=\$\{VERSION\} -X main\.commit=\$\{COMMIT\} -X main\.date=\$\{DATE\}" -o (\S+) \./cmd/rlproxy$`)

func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t)
	if len(stages) != 2 {
		t.Fatalf("%d stages, want 2 (builder, final)", len(stages))
	}
	build, final := stages[0], stages[1]
	if from := build[0].args; from != "golang:1.26 AS build" {
		t.Errorf("builder FROM %q", from)
	}
	var out string
	for _, run := range find(build, "RUN") {
		if m := buildRE.FindStringSubmatch(run); m != nil {
			out = m[1]
		}
	}
	if out == "" {
		t.Fatalf("no RUN matching %s in the builder stage: %q", buildRE, find(build, "RUN"))
	}
	for _, arg := range []string{"VERSION=dev", "COMMIT=unknown", "DATE=unknown"} {
		if !slices.Contains(find(build, "ARG"), arg) {
			t.Errorf("builder lacks ARG %s", arg)
		}
	}

	if from := final[0].args; from != "gcr.io/distroless/static-debian12:nonroot" {
		t.Errorf("final FROM %q, want the static distroless nonroot image", from)
	}
	if runs := find(final, "RUN"); len(runs) > 0 {
		t.Errorf("final stage has RUN %q: distroless has no shell", runs)
	}
	// The binary, and the state directory owned by nonroot (a volume
	// mounted on /var/lib/rlproxy takes that owner, so tls.acme can write).
	want := []string{"--from=build " + out + " /rlproxy", "--from=build --chown=65532:65532 /out/state /var/lib/rlproxy"}
	if got := find(final, "COPY"); !slices.Equal(got, want) {
		t.Errorf("final COPY %q, want %q", got, want)
	}
	if !slices.Contains(find(build, "RUN"), "install -d -m 0700 /out/state") {
		t.Errorf("builder RUN %q: no 0700 state directory /out/state", find(build, "RUN"))
	}
	if got := find(final, "USER"); !slices.Equal(got, []string{"nonroot"}) {
		t.Errorf("final USER %q, want nonroot", got)
	}
	if got := find(final, "EXPOSE"); !slices.Equal(got, []string{"8080 9090"}) {
		t.Errorf("EXPOSE %q", got)
	}
	ep := find(final, "ENTRYPOINT")
	cmd := find(final, "CMD")
	if len(ep) != 1 || len(cmd) != 1 {
		t.Fatalf("ENTRYPOINT %q, CMD %q: want one each", ep, cmd)
	}
	if got := execForm(t, ep[0]); !slices.Equal(got, []string{"/rlproxy"}) {
		t.Errorf("ENTRYPOINT %q", got)
	}
	// The flags put both listeners on all interfaces, whatever the mounted
	// file says: `docker run -p` then reaches the proxy and /metrics.
	if got := execForm(t, cmd[0]); !slices.Equal(got, []string{"-config", "/etc/rlproxy/rlproxy.yaml", "-listen", ":8080", "-admin-listen", ":9090"}) {
		t.Errorf("CMD %q", got)
	}
}

func TestCompose(t *testing.T) {
	var c compose
	decode(t, composeFile, &c)

	vk, ok := c.Services["valkey"]
	if !ok {
		t.Fatal("no valkey service")
	}
	if !strings.HasPrefix(vk.Image, "valkey/valkey:8") {
		t.Errorf("valkey image %q", vk.Image)
	}
	if vk.Healthcheck == nil || len(vk.Healthcheck.Test) != 2 || vk.Healthcheck.Test[0] != "CMD-SHELL" ||
		!strings.HasPrefix(vk.Healthcheck.Test[1], `valkey-cli -a "$$VALKEY_PASSWORD" `) {
		t.Errorf("valkey healthcheck %+v: want an authenticated valkey-cli ping", vk.Healthcheck)
	}
	// Valkey requires the password rlproxy is given; both come from .env,
	// whose example names every variable the compose file needs.
	if !slices.Contains(vk.Command, "--requirepass") || !strings.HasPrefix(vk.Environment["VALKEY_PASSWORD"], "${VALKEY_PASSWORD:?") {
		t.Errorf("valkey runs without the .env password: command %q, environment %v", vk.Command, vk.Environment)
	}
	example, err := os.ReadFile(".env.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"VALKEY_PASSWORD", "RLPROXY_KEY_HASH_SECRET"} {
		if !strings.Contains(string(example), "\n"+v+"=") {
			t.Errorf(".env.example does not set %s", v)
		}
		if got := c.Services["rlproxy"].Environment[v]; got != "${"+v+":?set "+v+" in deploy/.env (see .env.example)}" {
			t.Errorf("rlproxy environment %s = %q, want it required from .env", v, got)
		}
	}

	rl, ok := c.Services["rlproxy"]
	if !ok || rl.Build == nil {
		t.Fatal("no rlproxy service built from source")
	}
	ctxDir := filepath.Clean(rl.Build.Context)
	if abs, _ := filepath.Abs(ctxDir); abs != mustAbs(t, repoRoot) {
		t.Errorf("build context %q is not the repository root", rl.Build.Context)
	}
	if _, err := os.Stat(filepath.Join(ctxDir, rl.Build.Dockerfile)); err != nil {
		t.Errorf("build dockerfile: %v", err)
	}
	for _, f := range []string{"go.mod", "go.sum", "cmd/rlproxy"} {
		if _, err := os.Stat(filepath.Join(ctxDir, f)); err != nil {
			t.Errorf("build context lacks %s: %v", f, err)
		}
	}
	if d := rl.DependsOn["valkey"].Condition; d != "service_healthy" {
		t.Errorf("rlproxy depends_on valkey condition %q, want service_healthy", d)
	}

	// The config mount: its source is the config's directory (a file's
	// mount misses an edit saved by rename), its target the directory of
	// the image's CMD path.
	mounted := false
	for _, v := range rl.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			t.Errorf("volume %q: want SOURCE:TARGET[:ro]", v)
			continue
		}
		if _, err := os.Stat(parts[0]); err != nil {
			t.Errorf("volume %q: %v", v, err)
		}
		if parts[1] == "/etc/rlproxy" && filepath.Clean(parts[0]) == configDir {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("volumes %q do not mount the directory %s at /etc/rlproxy", rl.Volumes, configDir)
	}

	// The health check runs the binary itself (no shell in the image) against
	// the admin port.
	var cfg proxyConfig
	decode(t, configFile, &cfg)
	hc := rl.Healthcheck
	if hc == nil || len(hc.Test) < 2 || hc.Test[0] != "CMD" || hc.Test[1] != "/rlproxy" {
		t.Fatalf("rlproxy healthcheck %+v: want [CMD /rlproxy …] (exec form)", hc)
	}
	hurl := healthURL(t, hc.Test)
	_, adminPort := splitHostPort(t, cfg.AdminListen)
	if hurl.Port() != adminPort || hurl.Hostname() != "127.0.0.1" {
		t.Errorf("healthcheck URL %s is not this container's admin port %s", hurl, adminPort)
	}

	// Published ports are the ones the config listens on, and in-container
	// listeners are on all interfaces (loopback would not be reachable).
	_, listenPort := splitHostPort(t, cfg.Listen)
	for _, p := range []string{listenPort, adminPort} {
		found := false
		for _, m := range rl.Ports {
			found = found || strings.HasSuffix(m, ":"+p)
		}
		if !found {
			t.Errorf("port %s is not published: %q", p, rl.Ports)
		}
	}
	for _, addr := range []string{cfg.Listen, cfg.AdminListen} {
		if host, _ := splitHostPort(t, addr); host != "" && host != "0.0.0.0" && host != "::" {
			t.Errorf("listen address %q is unreachable from outside the container", addr)
		}
	}

	// Hosts in the config are compose services.
	if cfg.Store.Type != "valkey" || !slices.Equal(cfg.Store.Valkey.Addrs, []string{"valkey:6379"}) {
		t.Errorf("store %+v, want valkey at valkey:6379", cfg.Store)
	}
	if len(cfg.Upstreams) == 0 {
		t.Error("config has no upstreams")
	}
	for name, u := range cfg.Upstreams {
		pu, err := url.Parse(u.URL)
		if err != nil {
			t.Errorf("upstream %s: %v", name, err)
			continue
		}
		svc, ok := c.Services[pu.Hostname()]
		if !ok || svc.Image == "" {
			t.Errorf("upstream %s host %q is not an image service of the compose file", name, pu.Hostname())
		}
		if _, ok := rl.DependsOn[pu.Hostname()]; !ok {
			t.Errorf("rlproxy does not depend_on upstream service %q", pu.Hostname())
		}
	}
}

// TestConfigLoads: the compose config is valid and warning-free for the
// config package itself (what `rlproxy validate` runs), and says what the
// compose file assumes.
func TestConfigLoads(t *testing.T) {
	composeEnv(t)
	cfg, err := config.LoadWith(configFile, config.LoadOptions{})
	if err != nil {
		t.Fatalf("loading %s: %v", configFile, err)
	}
	for _, w := range cfg.Warnings {
		t.Errorf("warning: %v", w)
	}
	if cfg.Store.Type != "valkey" || !slices.Equal(cfg.Store.Valkey.Addrs, []string{"valkey:6379"}) {
		t.Errorf("store %s at %q, want valkey at valkey:6379", cfg.Store.Type, cfg.Store.Valkey.Addrs)
	}
	if cfg.Listen != ":8080" || cfg.AdminListen != ":9090" {
		t.Errorf("listen %q, admin_listen %q", cfg.Listen, cfg.AdminListen)
	}
}

// composeEnv sets the variables docker compose passes from .env, with the
// example's values.
func composeEnv(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(".env.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			t.Setenv(k, v)
		}
	}
}

// TestDockerignore: nothing the build needs is excluded from the context.
func TestDockerignore(t *testing.T) {
	b, err := os.ReadFile(ignoreFile)
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for line := range strings.Lines(string(b)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, strings.Trim(line, "/"))
		}
	}
	for _, must := range []string{".git/HEAD", "deploy/compose/rlproxy.yaml", "rlproxy", "x/y.test"} {
		if !ignored(patterns, must) {
			t.Errorf("%s is sent to the build context; want it ignored", must)
		}
	}
	err = filepath.WalkDir(repoRoot, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		needed := rel == "go.mod" || rel == "go.sum" ||
			(strings.HasPrefix(rel, "cmd/") || strings.HasPrefix(rel, "internal/")) &&
				!strings.HasSuffix(rel, "_test.go") && !strings.Contains(rel, "/testdata/")
		if needed && ignored(patterns, rel) {
			t.Errorf("%s is needed by the build but excluded by .dockerignore", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// ignored applies .dockerignore patterns (Go path.Match plus a leading
// "**/"; a match on a directory excludes everything under it) to rel.
func ignored(patterns []string, rel string) bool {
	parts := strings.Split(rel, "/")
	for _, p := range patterns {
		if rest, ok := strings.CutPrefix(p, "**/"); ok {
			for i := range parts {
				if m, _ := path.Match(rest, strings.Join(parts[i:], "/")); m {
					return true
				}
			}
			continue
		}
		for i := 1; i <= len(parts); i++ {
			if m, _ := path.Match(p, strings.Join(parts[:i], "/")); m {
				return true
			}
		}
	}
	return false
}

// TestBinaryRunsComposeConfig builds cmd/rlproxy with the Dockerfile's flags
// and checks it is static, accepts the compose config (validate does not
// connect to valkey:6379) and answers the compose health check command;
// then it serves the compose config itself (service names pointed at a
// real redis-server and a local upstream), reloads on SIGHUP and exits 0
// on SIGTERM.
func TestBinaryRunsComposeConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	composeEnv(t)
	bin := filepath.Join(t.TempDir(), "rlproxy")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=deploy-test", "-o", bin, "./cmd/rlproxy")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building cmd/rlproxy: %v\n%s", err, out)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("binary has %v: not static, it will not run on distroless/static", p.Type)
		}
	}
	f.Close()

	if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil || !strings.Contains(string(out), "deploy-test") {
		t.Errorf("rlproxy version: %v: %q, want the -X main.version value", err, out)
	}
	if out, err := exec.Command(bin, "validate", "-config", configFile).CombinedOutput(); err != nil {
		t.Errorf("rlproxy validate -config %s: %v\n%s", configFile, err, out)
	}

	// The compose health check, pointed at a local stand-in for the admin port.
	var c compose
	decode(t, composeFile, &c)
	test := c.Services["rlproxy"].Healthcheck.Test
	for _, status := range []int{http.StatusOK, http.StatusServiceUnavailable} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
		}))
		u := healthURL(t, test)
		u.Host = srv.Listener.Addr().String()
		args := slices.Clone(test[2:])
		for i, a := range args {
			if strings.HasPrefix(a, "http://") {
				args[i] = u.String()
			}
		}
		err := exec.Command(bin, args...).Run()
		srv.Close()
		if (err == nil) != (status == http.StatusOK) {
			t.Errorf("health check %q against a %d: %v", args, status, err)
		}
	}
	serveComposeConfig(t, bin, test)
}

// serveComposeConfig runs bin on the compose config with its addresses
// moved to loopback: valkey:6379 → a real redis-server, whoami → a local
// upstream, :8080/:9090 → free ports (and the store timeout raised). The
// compose health check passes, docs/PRODUCT.md's API limit holds, SIGHUP
// reloads, SIGTERM exits 0.
func serveComposeConfig(t *testing.T, bin string, health []string) {
	rs := redisserver.Start(t)
	// As compose's Valkey: the password from .env is required (set after
	// start, so the harness's own readiness PING needs none).
	rs.Do(t, "CONFIG", "SET", "requirepass", os.Getenv("VALKEY_PASSWORD"))
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("whoami"))
	}))
	defer up.Close()
	orig, err := os.ReadFile(configFile)
	if err != nil {
		t.Fatal(err)
	}
	listen, admin := netutil.FreeAddr(t), netutil.FreeAddr(t)
	cfg := string(orig)
	for from, to := range map[string]string{
		`listen: ":8080"`:       `listen: "` + listen + `"`,
		`admin_listen: ":9090"`: `admin_listen: "` + admin + `"`,
		`"valkey:6379"`:         `"` + rs.Addr + `"`,
		`"http://whoami:80"`:    `"` + up.URL + `"`,
	} {
		if strings.Count(cfg, from) != 1 {
			t.Fatalf("%s: %q appears %d times, want once", configFile, from, strings.Count(cfg, from))
		}
		cfg = strings.Replace(cfg, from, to, 1)
	}
	path := filepath.Join(t.TempDir(), "rlproxy.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr netutil.LockedBuffer
	cmd := exec.Command(bin, "-config", path)
	cmd.Stderr = &stderr
	proc, err := netutil.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		proc.Kill() // nothing to do after a clean SIGTERM exit
		if t.Failed() {
			t.Logf("rlproxy stderr:\n%s", stderr.String())
		}
	}()

	// Ready within 10 s, by the compose health check command itself.
	args := slices.Clone(health[2:])
	for i, a := range args {
		if strings.HasPrefix(a, "http://") {
			args[i] = "http://" + admin + "/healthz"
		}
	}
	waitfor.Within(t, 10*time.Second, fmt.Sprintf("health check %q passes", args), func() bool { return exec.Command(bin, args...).Run() == nil })
	get := func(p string) *http.Response {
		t.Helper()
		resp, err := http.Get("http://" + listen + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	// docs/PRODUCT.md's API on the shared store: 5 pass, the 6th is refused.
	var codes []int
	for range 6 {
		codes = append(codes, get("/api/x").StatusCode)
	}
	if fmt.Sprint(codes) != "[200 200 200 200 200 429]" {
		t.Errorf("/api/ statuses %v, want 5×200 then 429", codes)
	}
	if resp := get("/"); resp.StatusCode != 200 {
		t.Errorf("/ (unlimited): %d", resp.StatusCode)
	}

	// SIGHUP after raising the api burst.
	raised := strings.Replace(cfg, "burst: 5\n    key: ip", "burst: 6\n    key: ip", 1)
	if raised == cfg {
		t.Fatal("no api burst to raise in the config")
	}
	if err := os.WriteFile(path, []byte(raised), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	reloads := func() string {
		resp, err := http.Get("http://" + admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return grepLines(string(body), "rlproxy_config_reloads_total{")
	}
	want := "rlproxy_config_reloads_total{result=\"failure\"} 0\nrlproxy_config_reloads_total{result=\"success\"} 1"
	if !waitfor.Poll(5*time.Second, func() bool { return reloads() == want }) {
		t.Fatalf("after SIGHUP: %q, want %q", reloads(), want)
	}
	// The new burst is served at once (q = burst; w = 6 tokens at 2 s
	// each). Whether the empty bucket admits now is the token state's
	// business (it survives the reload), so only the policy is checked.
	if resp := get("/api/x"); resp.Header.Get("RateLimit-Policy") != `"api";q=6;w=12` {
		t.Errorf("after the reload: RateLimit-Policy %q, want q=6", resp.Header.Get("RateLimit-Policy"))
	}

	if err := proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-proc.Exited():
		if err := proc.Err(); err != nil {
			t.Errorf("rlproxy exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("rlproxy still running 10 s after SIGTERM")
	}
}

// grepLines returns the lines of s containing substr.
func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// healthURL is the URL argument of a healthcheck command.
func healthURL(t *testing.T, test []string) *url.URL {
	t.Helper()
	for _, a := range test {
		if strings.HasPrefix(a, "http://") {
			u, err := url.Parse(a)
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
	}
	t.Fatalf("healthcheck %q has no http:// URL", test)
	return nil
}

func splitHostPort(t *testing.T, addr string) (host, port string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return host, port
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
