// Command rlsbench compares rlproxy's envoy_rls with envoyproxy/ratelimit
// on one redis-server: the same descriptors, the same gRPC client, the same
// limit (a fixed window of 1,000,000 per minute per remote_address, so every
// call is a store round trip that is allowed), decisions/s and latency
// percentiles. bench/rls.sh builds both and runs it.
//
//	rlsbench -rlproxy BIN -ratelimit BIN [-duration 5s] [-workers 32] [-keys 1000] [-out FILE]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// rlproxyConfig and ratelimitConfig express the same limit.
const rlproxyConfig = `listen: "127.0.0.1:0"
admin_listen: ""
log: {level: warn}
store: {type: valkey, valkey: {addrs: ["%s"], timeout: 500ms}}
policies:
  per-ip: {algorithm: fixed_window, limit: 1000000, window: 1m}
upstreams: {app: {builtin: echo}}
routes: [{name: none, upstream: app}]
envoy_rls:
  listen: "%s"
  mappings:
    - {name: per-ip, domain: bench, descriptor: [{key: remote_address}], policies: [per-ip]}
`

const ratelimitConfig = `domain: bench
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 1000000}
`

type options struct {
	rlproxy, ratelimit, out, note string
	duration, warmup              time.Duration
	workers, keys, rounds         int
}

func main() {
	var o options
	flag.StringVar(&o.rlproxy, "rlproxy", "", "rlproxy binary")
	flag.StringVar(&o.ratelimit, "ratelimit", "", "envoyproxy/ratelimit binary (src/service_cmd)")
	flag.StringVar(&o.out, "out", "", "also write the markdown report to this file")
	flag.StringVar(&o.note, "note", "", "a sentence for the report's header (e.g. how the processes were pinned)")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "measured run per service and round")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured run before each measured one")
	flag.IntVar(&o.workers, "workers", 32, "concurrent callers (one gRPC connection)")
	flag.IntVar(&o.keys, "keys", 1000, "distinct remote_address values, cycled")
	flag.IntVar(&o.rounds, "rounds", 1, "rounds; each measures both services, their order alternating")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "rlsbench:", err)
		os.Exit(1)
	}
}

// service is one RLS under test.
type service struct{ name, addr string }

func run(o options) error {
	if o.rlproxy == "" || o.ratelimit == "" || o.rounds < 1 {
		return errors.New("want -rlproxy BIN, -ratelimit BIN and -rounds >= 1")
	}
	dir, err := os.MkdirTemp("", "rlsbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
			_ = p.Wait()
		}
	}()
	services, procs, err := startAll(dir, o)
	if err != nil {
		return err
	}
	results, err := rounds(services, o)
	if err != nil {
		return err
	}
	md := report(services, results, o)
	fmt.Print(md)
	if o.out != "" {
		return os.WriteFile(o.out, []byte(md), 0o644)
	}
	return nil
}

// startAll starts redis-server, rlproxy and envoyproxy/ratelimit on free
// ports and waits until both services listen. The processes it returns
// (also on error) are the caller's to stop.
func startAll(dir string, o options) ([]service, []*exec.Cmd, error) {
	var procs []*exec.Cmd
	redis, rlp, rl := freeAddr(), freeAddr(), freeAddr()
	_, rport, _ := net.SplitHostPort(redis)
	p, err := startProc(dir, "redis", nil, "redis-server", "--port", rport, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err != nil {
		return nil, procs, err
	}
	procs = append(procs, p)
	cfg := filepath.Join(dir, "rlproxy.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, rlproxyConfig, redis, rlp), 0o600); err != nil {
		return nil, procs, err
	}
	if p, err = startProc(dir, "rlproxy", nil, o.rlproxy, "-config", cfg); err != nil {
		return nil, procs, err
	}
	procs = append(procs, p)
	if p, err = startRatelimit(dir, o.ratelimit, redis, rl); err != nil {
		return nil, procs, err
	}
	procs = append(procs, p)
	services := []service{{"rlproxy envoy_rls", rlp}, {"envoyproxy/ratelimit", rl}}
	for _, s := range services {
		if err := waitListening(s.addr, 15*time.Second); err != nil {
			return nil, procs, fmt.Errorf("%s: %w (logs in %s)", s.name, err, dir)
		}
	}
	return services, procs, nil
}

// rounds measures every service o.rounds times, interleaved: round r runs
// them in order, or reversed when r is odd, so neither always goes first.
// results[i][r] is service i in round r.
func rounds(services []service, o options) ([][]result, error) {
	results := make([][]result, len(services))
	for r := range o.rounds {
		for k := range services {
			i := k
			if r%2 == 1 {
				i = len(services) - 1 - k
			}
			res, err := measure(services[i].addr, o)
			if err != nil {
				return nil, fmt.Errorf("%s, round %d: %w", services[i].name, r+1, err)
			}
			fmt.Fprintf(os.Stderr, "round %d %s: %.0f decisions/s, p50 %v, p99 %v\n", r+1, services[i].name, res.rate, res.p50, res.p99)
			results[i] = append(results[i], res)
		}
	}
	return results, nil
}

// startRatelimit runs envoyproxy/ratelimit with its file config on redis.
func startRatelimit(dir, bin, redis, grpcAddr string) (*exec.Cmd, error) {
	conf := filepath.Join(dir, "runtime", "ratelimit", "config")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(conf, "bench.yaml"), []byte(ratelimitConfig), 0o600); err != nil {
		return nil, err
	}
	_, gport, _ := net.SplitHostPort(grpcAddr)
	_, hport, _ := net.SplitHostPort(freeAddr())
	_, dport, _ := net.SplitHostPort(freeAddr())
	env := []string{"USE_STATSD=false", "LOG_LEVEL=warn", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + redis,
		"RUNTIME_ROOT=" + filepath.Join(dir, "runtime"), "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + gport, "HOST=127.0.0.1", "PORT=" + hport, "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + dport}
	return startProc(dir, "ratelimit", env, bin)
}

func startProc(dir, name string, env []string, bin string, args ...string) (*exec.Cmd, error) {
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return cmd, nil
}

type result struct {
	rate      float64
	p50, p99  time.Duration
	ok, calls int64
}

// measure runs o.workers callers on one connection for o.warmup, then for
// o.duration recording every call's latency.
func measure(addr string, o options) (result, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return result{}, err
	}
	defer cc.Close()
	c := rlsv3.NewRateLimitServiceClient(cc)
	if _, err := c.ShouldRateLimit(context.Background(), request(0)); err != nil {
		return result{}, err
	}
	if _, _, err := drive(c, o, o.warmup); err != nil {
		return result{}, err
	}
	lat, ok, err := drive(c, o, o.duration)
	if err != nil {
		return result{}, err
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(time.Microsecond) }
	return result{rate: float64(len(lat)) / o.duration.Seconds(), p50: pct(0.5), p99: pct(0.99), ok: ok, calls: int64(len(lat))}, nil
}

func request(i int) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*rlcommon.RateLimitDescriptor{{
		Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0." + strconv.Itoa(i/256%256) + "." + strconv.Itoa(i%256)}},
	}}}
}

// drive calls c from o.workers goroutines for d; it returns the latencies
// and how many calls answered OK.
func drive(c rlsv3.RateLimitServiceClient, o options, d time.Duration) ([]time.Duration, int64, error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		all  []time.Duration
		ok   atomic.Int64
		fail atomic.Pointer[error]
	)
	deadline := time.Now().Add(d)
	for w := range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			for i := w; time.Now().Before(deadline); i += o.workers {
				start := time.Now()
				resp, err := c.ShouldRateLimit(context.Background(), request(i%o.keys))
				if err != nil {
					fail.Store(&err)
					return
				}
				lat = append(lat, time.Since(start))
				if resp.OverallCode == rlsv3.RateLimitResponse_OK {
					ok.Add(1)
				}
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if e := fail.Load(); e != nil {
		return nil, 0, *e
	}
	if len(all) == 0 {
		return nil, 0, io.ErrUnexpectedEOF
	}
	return all, ok.Load(), nil
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitListening(addr string, d time.Duration) error {
	end := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(end) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
