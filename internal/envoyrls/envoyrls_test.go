package envoyrls_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"rlproxy/internal/config"
	"rlproxy/internal/envoyrls"
	"rlproxy/internal/policy"
	"rlproxy/internal/store/memory"
)

// t0 is the injected clock's start: 10 s into a minute, so fixed windows
// of a minute reset in exactly 50 s.
const t0 = int64(1_796_000_000_000/60_000*60_000 + 10_000)

const cfgYAML = `
routes: [{name: none, upstream: app}]
upstreams: {app: {builtin: echo}}
policies:
  fw: {algorithm: fixed_window, limit: 3, window: 1m}
  big: {algorithm: fixed_window, limit: 10, window: 1m}
  one: {algorithm: fixed_window, limit: 1, window: 1m}
  tb: {algorithm: token_bucket, rate: 5r/m, burst: 5}
  tens: {algorithm: fixed_window, limit: 10, window: 10s}
envoy_rls:
  listen: "127.0.0.1:0"
  mappings:
    - {name: per-ip, domain: edge, descriptor: [{key: remote_address}], policies: [fw]}
    - {name: login, domain: edge, descriptor: [{key: header_match, value: login}, {key: remote_address}], policies: [big]}
    - {name: scarce, domain: edge, descriptor: [{key: scarce}], policies: [one]}
    - {name: bucket, domain: edge, descriptor: [{key: user}], policies: [tb, tens]}
    - {name: tens, domain: edge, descriptor: [{key: ten}], policies: [tens]}
`

// serve runs the service on an injected clock (Unix ms) over real gRPC on
// loopback and returns a client.
func serve(t *testing.T, now *atomic.Int64) (rlsv3.RateLimitServiceClient, *grpc.ClientConn) {
	t.Helper()
	cfg, err := config.ParseWith("rls.yaml", []byte(cfgYAML), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New(memory.Options{Clock: now.Load, SweepInterval: -1})
	t.Cleanup(func() { _ = st.Close() })
	lim, err := policy.New(cfg, policy.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	svc := envoyrls.New(nil, nil)
	svc.Swap(cfg, lim)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = svc.Serve(ln) }()
	t.Cleanup(func() { svc.Shutdown(context.Background()) })
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return rlsv3.NewRateLimitServiceClient(cc), cc
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *rlcommon.RateLimitDescriptor {
	d := &rlcommon.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func call(t *testing.T, c rlsv3.RateLimitServiceClient, hits uint32, ds ...*rlcommon.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: ds, HitsAddend: hits})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func headers(resp *rlsv3.RateLimitResponse) string {
	var b []string
	for _, h := range resp.ResponseHeadersToAdd {
		b = append(b, h.Key+": "+h.Value)
	}
	return strings.Join(b, "; ")
}

// TestOKThenOverLimit: OK × 3 then OVER_LIMIT, with exact remaining, reset,
// current_limit and headers.
func TestOKThenOverLimit(t *testing.T) {
	var now atomic.Int64
	now.Store(t0)
	c, _ := serve(t, &now)
	for i := 1; i <= 4; i++ {
		resp := call(t, c, 0, desc("remote_address", "192.0.2.1"))
		st := resp.Statuses[0]
		wantCode, wantRemaining := rlsv3.RateLimitResponse_OK, uint32(3-i)
		wantHeaders := `RateLimit: "fw";r=` + string(rune('0'+3-i)) + `;t=50; RateLimit-Policy: "fw";q=3;w=60`
		if i == 4 {
			wantCode, wantRemaining = rlsv3.RateLimitResponse_OVER_LIMIT, 0
			wantHeaders = `RateLimit: "fw";r=0;t=50; RateLimit-Policy: "fw";q=3;w=60; Retry-After: 50`
		}
		if resp.OverallCode != wantCode || st.Code != wantCode || st.LimitRemaining != wantRemaining ||
			st.DurationUntilReset.AsDuration() != 50*time.Second {
			t.Fatalf("call %d: overall %v, status %v", i, resp.OverallCode, st)
		}
		if cl := st.CurrentLimit; cl.GetRequestsPerUnit() != 3 || cl.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE || cl.GetName() != "fw" || cl.GetUnitMultiplier() != nil {
			t.Fatalf("call %d: current_limit %v", i, cl)
		}
		if got := headers(resp); got != wantHeaders {
			t.Fatalf("call %d: headers %q, want %q", i, got, wantHeaders)
		}
	}
	// Another address is another client; a minute later the window is new.
	if resp := call(t, c, 0, desc("remote_address", "192.0.2.2")); resp.Statuses[0].LimitRemaining != 2 {
		t.Fatalf("other client: %v", resp.Statuses[0])
	}
	now.Add(50_000)
	if resp := call(t, c, 0, desc("remote_address", "192.0.2.1")); resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].LimitRemaining != 2 {
		t.Fatalf("next window: %v", resp)
	}
}

// TestHitsAddend: hits_addend is the cost, a descriptor's own overrides
// the request's.
func TestHitsAddend(t *testing.T) {
	var now atomic.Int64
	now.Store(t0)
	c, _ := serve(t, &now)
	login := desc("header_match", "login", "remote_address", "192.0.2.1")
	if r := call(t, c, 5, login); r.Statuses[0].LimitRemaining != 5 {
		t.Fatalf("hits_addend 5: %v", r.Statuses[0])
	}
	login.HitsAddend = wrapperspb.UInt64(4)
	if r := call(t, c, 5, login); r.Statuses[0].LimitRemaining != 1 {
		t.Fatalf("descriptor hits_addend 4: %v", r.Statuses[0])
	}
	login.HitsAddend = nil
	if r := call(t, c, 2, login); r.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || r.Statuses[0].LimitRemaining != 1 {
		t.Fatalf("2 with 1 left: %v", r)
	}
	if r := call(t, c, 0, login); r.OverallCode != rlsv3.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("1 with 1 left (hits_addend 0 counts 1): %v", r)
	}
}

// TestAtomic: two descriptors in one call where one is over: OVER_LIMIT,
// and the other is not charged.
func TestAtomic(t *testing.T) {
	var now atomic.Int64
	now.Store(t0)
	c, _ := serve(t, &now)
	ip, scarce := desc("remote_address", "192.0.2.9"), desc("scarce", "x")
	if r := call(t, c, 0, scarce); r.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("first scarce: %v", r)
	}
	for range 3 {
		r := call(t, c, 0, ip, scarce)
		if r.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || r.Statuses[0].Code != rlsv3.RateLimitResponse_OK ||
			r.Statuses[1].Code != rlsv3.RateLimitResponse_OVER_LIMIT || r.Statuses[0].LimitRemaining != 3 {
			t.Fatalf("ip + exhausted scarce: %v", r)
		}
	}
	if r := call(t, c, 0, ip); r.Statuses[0].LimitRemaining != 2 {
		t.Fatalf("ip after three refused calls: %v, want 2 left (nothing charged)", r.Statuses[0])
	}
}

// TestUnmappedAndUnits: descriptors no mapping takes are OK and unlimited;
// current_limit uses the longest unit dividing the period, and the
// binding policy of a descriptor is its scarcest.
func TestUnmappedAndUnits(t *testing.T) {
	var now atomic.Int64
	now.Store(t0)
	c, _ := serve(t, &now)
	r := call(t, c, 0, desc("remote_address", "a", "extra", "b"), desc("header_match", "logout", "remote_address", "a"), desc("user", "u1"))
	if r.OverallCode != rlsv3.RateLimitResponse_OK || len(r.Statuses) != 3 {
		t.Fatalf("%v", r)
	}
	for i := range 2 {
		if s := r.Statuses[i]; s.Code != rlsv3.RateLimitResponse_OK || s.CurrentLimit != nil || s.DurationUntilReset != nil {
			t.Fatalf("unmapped descriptor %d: %v", i, s)
		}
	}
	// tb: 4 left, full in 12 s; tens: 9 left, window ends in 10 s: tb binds.
	s := r.Statuses[2]
	if s.LimitRemaining != 4 || s.DurationUntilReset.AsDuration() != 12*time.Second || s.CurrentLimit.GetName() != "tb" ||
		s.CurrentLimit.GetRequestsPerUnit() != 5 || s.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE {
		t.Fatalf("bucket descriptor: %v", s)
	}
	ten := call(t, c, 0, desc("ten", "x")).Statuses[0]
	if cl := ten.CurrentLimit; cl.GetRequestsPerUnit() != 10 || cl.GetUnit() != rlsv3.RateLimitResponse_RateLimit_SECOND ||
		cl.GetUnitMultiplier().GetValue() != 10 || ten.DurationUntilReset.AsDuration() != 10*time.Second {
		t.Fatalf("10 per 10 s: %v", ten)
	}
	s = call(t, c, 0, desc("user", "u3"), desc("user", "u3")).Statuses[1]
	if s.LimitRemaining != 3 {
		t.Fatalf("one call charging u3 twice: %v", s)
	}
	unknown, err := c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "other", Descriptors: []*rlcommon.RateLimitDescriptor{desc("remote_address", "a")}})
	if err != nil || unknown.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("unknown domain: %v %v", unknown, err)
	}
}

// TestHealthAndReflection: the gRPC health service reports the RLS
// serving and reflection lists it.
func TestHealthAndReflection(t *testing.T) {
	var now atomic.Int64
	now.Store(t0)
	_, cc := serve(t, &now)
	hr, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"})
	if err != nil || hr.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", hr, err)
	}
	stream, err := reflectpb.NewServerReflectionClient(cc).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "envoy.service.ratelimit.v3.RateLimitService") {
		t.Fatalf("reflection lists %v", names)
	}
	_ = stream.CloseSend()
}
