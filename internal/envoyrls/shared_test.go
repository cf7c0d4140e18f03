package envoyrls_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/redisserver"
	"rlproxy/internal/testutil/rlproxytest"
)

// startRLS runs rlproxy (the production wiring) with envoy_rls on a free
// port and returns a client for it.
func startRLS(t *testing.T, cfg string) (*rlproxytest.Instance, rlsv3.RateLimitServiceClient, *netutil.LockedBuffer) {
	t.Helper()
	log := &netutil.LockedBuffer{}
	in := rlproxytest.Start(t, "listen: \"127.0.0.1:0\"\nadmin_listen: \"127.0.0.1:0\"\n"+cfg, rlproxytest.WithLog(log))
	cc, err := grpc.NewClient(in.App.EnvoyRLSAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return in, rlsv3.NewRateLimitServiceClient(cc), log
}

const sharedCfg = `
store: {type: valkey, valkey: {addrs: ["%s"]}}
upstreams: {app: {builtin: echo}}
policies:
  per-ip: {algorithm: token_bucket, rate: 6r/h, burst: 6}
routes: [{name: none, upstream: app}]
envoy_rls:
  listen: "127.0.0.1:0"
  mappings:
    - {name: shared, domain: edge, descriptor: [{key: remote_address}], policies: [per-ip]}
`

// TestSharedQuota: two rlproxy instances on one real redis-server share
// the descriptor's quota, calls alternating between them.
func TestSharedQuota(t *testing.T) {
	rs := redisserver.Start(t)
	a, ca, logA := startRLS(t, fmt.Sprintf(sharedCfg, rs.Addr))
	b, cb, _ := startRLS(t, fmt.Sprintf(sharedCfg, rs.Addr))
	clients := []rlsv3.RateLimitServiceClient{ca, cb}
	for i := 0; i < 8; i++ {
		resp := call(t, clients[i%2], 0, desc("remote_address", "198.51.100.7"))
		want, remaining := rlsv3.RateLimitResponse_OK, uint32(5-i)
		if i >= 6 {
			want, remaining = rlsv3.RateLimitResponse_OVER_LIMIT, 0
		}
		if resp.OverallCode != want || resp.Statuses[0].LimitRemaining != remaining {
			t.Fatalf("call %d (instance %d): %v %v, want %v with %d left", i+1, i%2, resp.OverallCode, resp.Statuses[0], want, remaining)
		}
	}
	for _, x := range []struct {
		in      *rlproxytest.Instance
		allowed float64
	}{{a, 3}, {b, 3}} {
		if n := requestsTotal(t, x.in.Metrics(t), "shared", "allowed"); n != x.allowed {
			t.Fatalf("allowed on one instance = %v, want %v", n, x.allowed)
		}
		if n := requestsTotal(t, x.in.Metrics(t), "shared", "rejected"); n != 1 {
			t.Fatalf("rejected on one instance = %v, want 1", n)
		}
	}
	if !strings.Contains(logA.String(), `msg="request refused" route=shared policy=per-ip`) {
		t.Fatalf("no refusal log line naming the mapping:\n%s", logA.String())
	}
	if strings.Contains(metricsText(t, a.Metrics(t)), "198.51.100.7") {
		t.Fatal("a client value is in a metric label")
	}
}

// TestStoreDown: with the store unreachable a fail-closed policy makes the
// call fail (UNAVAILABLE: Envoy's failure_mode_deny decides), a fail-open
// one answers OK.
func TestStoreDown(t *testing.T) {
	dead := netutil.FreeAddr(t)
	_, c, _ := startRLS(t, `
store: {type: valkey, valkey: {addrs: ["`+dead+`"], timeout: 100ms}}
upstreams: {app: {builtin: echo}}
policies:
  closed: {algorithm: fixed_window, limit: 3, window: 1h, on_store_error: deny}
  open: {algorithm: fixed_window, limit: 3, window: 1h}
routes: [{name: none, upstream: app}]
envoy_rls:
  listen: "127.0.0.1:0"
  mappings:
    - {name: closed, domain: edge, descriptor: [{key: closed}], policies: [closed]}
    - {name: open, domain: edge, descriptor: [{key: open}], policies: [open]}
`)
	_, err := c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{desc("closed", "x")}})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("fail-closed policy, store down: %v, want UNAVAILABLE", err)
	}
	if r := call(t, c, 0, desc("open", "x")); r.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("fail-open policy, store down: %v", r)
	}
}

// requestsTotal is rlproxy_requests_total{route, decision} summed over policies.
func requestsTotal(t *testing.T, mfs map[string]*dto.MetricFamily, route, decision string) float64 {
	t.Helper()
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "rlproxy_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["route"] == route && labels["decision"] == decision {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// metricsText is every label value in mfs (a scrape of /metrics), for leak checks.
func metricsText(t *testing.T, mfs map[string]*dto.MetricFamily) string {
	t.Helper()
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				b.WriteString(lp.GetValue() + "\n")
			}
		}
	}
	return b.String()
}

// TestReloadAndShaping: a reload changes the mappings' policies at once;
// a leaky-bucket wait is served by waiting, one beyond server.max_wait is
// OVER_LIMIT at once and refunded.
func TestReloadAndShaping(t *testing.T) {
	cfg := `
server: {max_wait: 700ms}
upstreams: {app: {builtin: echo}}
policies:
  p: {algorithm: fixed_window, limit: 2, window: 1h}
routes: [{name: none, upstream: app}]
envoy_rls:
  listen: "127.0.0.1:0"
  mappings:
    - {name: m, domain: edge, descriptor: [{key: k}], policies: [p]}
`
	in, c, _ := startRLS(t, cfg)
	if r := call(t, c, 0, desc("k", "a")); r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 2 {
		t.Fatalf("before reload: %v", r.Statuses[0])
	}
	shaped := strings.Replace(cfg, "p: {algorithm: fixed_window, limit: 2, window: 1h}", "p: {algorithm: leaky_bucket, rate: 2r/s, burst: 5}", 1)
	in.Rewrite(t, "listen: \"127.0.0.1:0\"\nadmin_listen: \"127.0.0.1:0\"\n"+shaped)
	in.App.Reload("test")
	if r := call(t, c, 0, desc("k", "a")); r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 2 || r.Statuses[0].CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_SECOND {
		t.Fatalf("after reload: %v", r.Statuses[0])
	}
	// 2 r/s: the next call waits 500 ms; then hits_addend 3 would wait beyond max_wait.
	start := time.Now()
	if r := call(t, c, 0, desc("k", "a")); r.OverallCode != rlsv3.RateLimitResponse_OK || time.Since(start) < 400*time.Millisecond {
		t.Fatalf("shaped call: %v after %v", r.OverallCode, time.Since(start))
	}
	for range 2 {
		start = time.Now()
		r := call(t, c, 3, desc("k", "a"))
		if r.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || time.Since(start) > 400*time.Millisecond {
			t.Fatalf("beyond max_wait: %v after %v", r.OverallCode, time.Since(start))
		}
	}
	// Refunded: had the refusals been charged, this one would wait seconds.
	if r := call(t, c, 0, desc("k", "a")); r.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("after two refunded refusals: %v", r.OverallCode)
	}
}
