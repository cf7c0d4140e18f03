package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"rlproxy/internal/testutil/netutil"
)

// The addresses written in bench/configs/*: renderConfig replaces them with
// the free ports of this run, so the files stay valid on their own.
const (
	defaultUpstream = "127.0.0.1:18100"
	defaultListen   = "127.0.0.1:18180"
	defaultValkey   = "127.0.0.1:18379"
)

// lab holds what every target needs to start: the supervisor, where the
// configs and binaries are, and the CPU pinning.
type lab struct {
	sup        *supervisor
	configDir  string // bench/configs
	binDir     string // where run.sh built upstream, minproxy, rlproxy
	rlproxyBin string // "" or missing file: rlproxy rows are "not built"
	// baseBin is the rlproxy built from BENCH_BASE, "" when the run has no
	// A/B pairs.
	baseBin   string
	proxyCPUs string // taskset list for the proxy under test
	loadCPUs  string // taskset list for wrk, the upstream, Valkey, the load generator
}

// target is one row of the benchmark: something wrk sends requests to.
type target struct {
	ID   string // stable identifier used in JSON and -targets
	Name string // row label
	// Status is "ok" when the target is up, else why it is not measured
	// ("not built", "failed to start: ...").
	Status string
	URL    string
	Keys   int // X-API-Key values wrk sends in turn (targetSpec.keys); 0 = none
	// AdminURL is the admin listener ("" when off); PollPage makes every
	// measured run poll its page (targetSpec.pollPage).
	AdminURL string
	PollPage bool
	// proxy is the proxy under test (nil for direct); store is the Valkey
	// server of a valkey-backed target (nil otherwise).
	proxy     *proc
	store     *proc
	storeAddr string
}

// renderConfig copies configDir/name to dir with the default addresses
// replaced by the run's; each key of repl must occur in the file, so the
// configs and this harness cannot drift apart silently.
func renderConfig(configDir, name, dir string, repl map[string]string) (string, error) {
	b, err := os.ReadFile(filepath.Join(configDir, name))
	if err != nil {
		return "", fmt.Errorf("reading config: %w", err)
	}
	s := string(b)
	for from, to := range repl {
		if !strings.Contains(s, from) {
			return "", fmt.Errorf("rendering %s: address %s not found", name, from)
		}
		s = strings.ReplaceAll(s, from, to)
	}
	out := filepath.Join(dir, name)
	if err := os.WriteFile(out, []byte(s), 0o644); err != nil {
		return "", fmt.Errorf("writing config: %w", err)
	}
	return out, nil
}

// workDir makes runDir/id, world-readable so nginx workers (user nobody)
// can use their temp paths.
func (l *lab) workDir(id string) (string, error) {
	dir := filepath.Join(l.sup.runDir, id)
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return "", fmt.Errorf("making work dir: %w", err)
	}
	return dir, nil
}

// startUpstream starts bench/upstream on the load CPUs; countHeader, when
// set, enables per-value counting of that header.
func (l *lab) startUpstream(ctx context.Context, countHeader string) (*proc, string, error) {
	addr, err := netutil.PickFreeAddr()
	if err != nil {
		return nil, "", err
	}
	argv := []string{filepath.Join(l.binDir, "upstream"), "-listen", addr}
	if countHeader != "" {
		argv = append(argv, "-count-header", countHeader)
	}
	p, err := l.sup.start("upstream", l.loadCPUs, nil, argv...)
	if err != nil {
		return nil, "", err
	}
	if err := p.waitHTTP(ctx, "http://"+addr+"/"); err != nil {
		return nil, "", errors.New(p.failure(err))
	}
	return p, addr, nil
}

// The throughput upstreams (-upstream): nginx answering from memory, the
// default, or the Go server bench/upstream.
const (
	upstreamNginx = "nginx"
	upstreamGo    = "go"
	// upstreamConf is nginx's upstream config in the configs directory.
	upstreamConf = "nginx-upstream.conf"
)

// startNginxUpstream starts nginx with upstreamConf on a free port on the
// load CPUs: every path answers 200 with a fixed body, at a fraction of
// bench/upstream's CPU per request, so the load CPUs keep headroom beyond
// the fastest proxy's rate.
func (l *lab) startNginxUpstream(ctx context.Context) (*proc, string, error) {
	addr, err := netutil.PickFreeAddr()
	if err != nil {
		return nil, "", err
	}
	dir, err := l.workDir("upstream")
	if err != nil {
		return nil, "", err
	}
	path, err := renderConfig(l.configDir, upstreamConf, dir, map[string]string{defaultUpstream: addr})
	if err != nil {
		return nil, "", err
	}
	p, err := l.sup.start("upstream", l.loadCPUs, nil, "nginx", "-p", dir+"/", "-c", path, "-e", "stderr")
	if err != nil {
		return nil, "", err
	}
	if err := p.waitHTTP(ctx, "http://"+addr+"/"); err != nil {
		return nil, "", errors.New(p.failure(err))
	}
	return p, addr, nil
}

// startValkey starts redis-server (Valkey's protocol and Lua) on a free port
// on the load CPUs, without persistence.
func (l *lab) startValkey(ctx context.Context, id string) (*proc, string, error) {
	addr, err := netutil.PickFreeAddr()
	if err != nil {
		return nil, "", err
	}
	dir, err := l.workDir(id)
	if err != nil {
		return nil, "", err
	}
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	p, err := l.sup.start(id, l.loadCPUs, nil, "redis-server",
		"--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--dir", dir, "--logfile", "")
	if err != nil {
		return nil, "", err
	}
	if err := p.waitTCP(ctx, addr); err != nil {
		return nil, "", errors.New(p.failure(err))
	}
	if _, err := commandStats(addr); err != nil {
		return nil, "", errors.New(p.failure(err))
	}
	return p, addr, nil
}

// binFor is the rlproxy binary of t: the base build for an A/B twin.
func (l *lab) binFor(t *target) string {
	if strings.HasSuffix(t.ID, baseSuffix) {
		return l.baseBin
	}
	return l.rlproxyBin
}

// startProxy fills t by starting a proxy of the given kind ("nginx",
// "caddy", "minproxy", "ceiling", "rlproxy") with config file conf (ignored
// by minproxy and ceiling, which take flags) in front of upstream. withValkey also starts a redis-server for
// the config's store. A failure is recorded in t.Status, never returned:
// the benchmark goes on without that row.
func (l *lab) startProxy(ctx context.Context, t *target, kind, conf, upstream string, withValkey, withAdmin bool) {
	if kind == "rlproxy" {
		if _, err := os.Stat(l.binFor(t)); l.binFor(t) == "" || err != nil {
			t.Status = "not built"
			return
		}
	}
	if kind == "ceiling" {
		if _, err := os.Stat(filepath.Join(l.binDir, kind)); err != nil {
			t.Status = "not built"
			return
		}
	}
	if err := l.tryStartProxy(ctx, t, kind, conf, upstream, withValkey, withAdmin); err != nil {
		t.Status = "failed to start: " + err.Error()
		return
	}
	t.Status = "ok"
}

func (l *lab) tryStartProxy(ctx context.Context, t *target, kind, conf, upstream string, withValkey, withAdmin bool) error {
	listen, err := netutil.PickFreeAddr()
	if err != nil {
		return err
	}
	dir, err := l.workDir(t.ID)
	if err != nil {
		return err
	}
	repl := map[string]string{defaultListen: listen, defaultUpstream: upstream}
	if withValkey {
		t.store, t.storeAddr, err = l.startValkey(ctx, t.ID+"-valkey")
		if err != nil {
			return fmt.Errorf("starting valkey: %w", err)
		}
		repl[defaultValkey] = t.storeAddr
	}
	if withAdmin {
		admin, err := netutil.PickFreeAddr()
		if err != nil {
			return err
		}
		repl[defaultAdmin] = admin
		t.AdminURL = "http://" + admin
	}
	var argv, env []string
	if kind == "minproxy" || kind == "ceiling" {
		argv = []string{filepath.Join(l.binDir, kind), "-listen", listen, "-upstream", "http://" + upstream}
	} else {
		path, err := renderConfig(l.configDir, conf, dir, repl)
		if err != nil {
			return err
		}
		switch kind {
		case "nginx":
			argv = []string{"nginx", "-p", dir + "/", "-c", path, "-e", "stderr"}
		case "caddy":
			argv = []string{"caddy", "run", "--adapter", "caddyfile", "--config", path}
			env = []string{"HOME=" + dir, "XDG_DATA_HOME=" + dir, "XDG_CONFIG_HOME=" + dir}
		case "rlproxy":
			argv = []string{l.binFor(t), "-config", path}
		default:
			return fmt.Errorf("unknown proxy kind %q", kind)
		}
	}
	p, err := l.sup.start(t.ID, l.proxyCPUs, env, argv...)
	if err != nil {
		return err
	}
	t.URL = "http://" + listen + "/"
	if err := p.waitHTTP(ctx, t.URL); err != nil {
		return errors.New(p.failure(err))
	}
	t.proxy = p
	return nil
}
