// Package envoyrls serves Envoy's global rate limit service,
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, over gRPC,
// deciding with rlproxy's policies and store: Envoy-based gateways (Envoy,
// Istio, Envoy Gateway, Contour) use rlproxy's limiter without a second
// proxy in their data path.
//
// envoy_rls.mappings maps a domain and a descriptor shape (keys in order,
// some values fixed) to policies; the descriptor's other values are the
// client id. The descriptors of one call are one atomic decision, as a
// route's policies are: each charged its hits_addend, or none charged.
// Fail modes are the policies': a fail-closed policy the store cannot
// decide makes the call fail with UNAVAILABLE, so that Envoy applies its
// own failure_mode_deny. Server reflection and the gRPC health service
// (grpc.health.v1) are served on the same listener.
package envoyrls

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"rlproxy/internal/algo"
	"rlproxy/internal/clientkey"
	"rlproxy/internal/config"
	"rlproxy/internal/logging"
	"rlproxy/internal/metrics"
	"rlproxy/internal/policy"
	"rlproxy/internal/proxy"
)

// MaxDescriptors bounds the descriptors of one call (each is a store
// check): Envoy sends one per rate limit action, a handful.
const MaxDescriptors = 64

// serviceName is the RLS service's full name, for the health service.
const serviceName = "envoy.service.ratelimit.v3.RateLimitService"

// Service is the rate limit service. Build it with New, give it the
// configuration with Swap (at start and on every reload), serve it with
// Serve.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer
	rt      atomic.Pointer[runtime]
	metrics *metrics.Metrics
	log     *slog.Logger
	grpc    *grpc.Server
	health  *health.Server
	calls   sync.Pool // *call
	// clients shows client ids in the refusal log as the admin page does.
	clients *clientkey.Display
}

// runtime is one configuration's compiled mappings.
type runtime struct {
	cfg     *config.Config
	lim     *policy.Limiter
	domains map[string][]*mapping
	refusal *logging.RefusalSampler
}

// mapping is one compiled config.RLSMapping.
type mapping struct {
	name     string
	entries  []config.RLSEntry
	policies []*policy.Policy
	counters []*metrics.PolicyCounters
}

// call is one ShouldRateLimit's scratch space, pooled.
type call struct {
	res    policy.Result
	keyed  []policy.Keyed
	owner  []int // descriptor index of each keyed item
	routes []string
	buf    []byte
}

// New returns a Service counting into m (nil: metrics.Discard()) and
// logging refusals to log (sampled at log.refusals_per_second); opts tune
// its gRPC server (package server counts each call as a use of its
// configuration).
func New(m *metrics.Metrics, log *slog.Logger, opts ...grpc.ServerOption) *Service {
	if m == nil {
		m = metrics.Discard()
	}
	s := &Service{metrics: m, log: log, grpc: grpc.NewServer(opts...), health: health.NewServer(), clients: clientkey.NewDisplay()}
	s.calls.New = func() any { return new(call) }
	rlsv3.RegisterRateLimitServiceServer(s.grpc, s)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	s.health.SetServingStatus(serviceName, healthpb.HealthCheckResponse_SERVING)
	return s
}

// SetClientDisplay makes the refusal log show client ids with d, the
// proxy's and the admin page's (one hash per client in all three); call it
// before serving.
func (s *Service) SetClientDisplay(d *clientkey.Display) { s.clients = d }

// Swap makes cfg, decided by lim, the configuration of calls from now on.
func (s *Service) Swap(cfg *config.Config, lim *policy.Limiter) {
	rt := &runtime{cfg: cfg, lim: lim, domains: map[string][]*mapping{}}
	if prev := s.rt.Load(); prev != nil && prev.cfg.Log.RefusalsPerSecond == cfg.Log.RefusalsPerSecond {
		rt.refusal = prev.refusal
	} else {
		rt.refusal = logging.NewRefusalSampler(s.log, cfg.Log.RefusalsPerSecond)
	}
	for _, cm := range cfg.EnvoyRLS.Mappings {
		m := &mapping{name: cm.Name, entries: cm.Entries}
		for _, pn := range cm.Policies {
			m.policies = append(m.policies, lim.Policy(pn))
			m.counters = append(m.counters, lim.Counters(cm.Name, pn))
		}
		rt.domains[cm.Domain] = append(rt.domains[cm.Domain], m)
	}
	s.rt.Store(rt)
}

// Serve serves gRPC on ln until Shutdown; it returns grpc.Server.Serve's error.
func (s *Service) Serve(ln net.Listener) error { return s.grpc.Serve(ln) }

// Shutdown reports NOT_SERVING, lets calls in flight finish until ctx is
// done, then closes every connection.
func (s *Service) Shutdown(ctx context.Context) {
	s.health.Shutdown()
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
	}
}

// match returns the first mapping of ms that d matches, or nil.
func match(ms []*mapping, d *rlcommon.RateLimitDescriptor) *mapping {
next:
	for _, m := range ms {
		if len(m.entries) != len(d.Entries) {
			continue
		}
		for i, e := range m.entries {
			de := d.Entries[i]
			if de.Key != e.Key || (e.HasValue && de.Value != e.Value) {
				continue next
			}
		}
		return m
	}
	return nil
}

// clientID appends d's client id on m to b: the mapping's name, then each
// value the mapping does not fix, length-prefixed so no two tuples collide.
func clientID(b []byte, m *mapping, d *rlcommon.RateLimitDescriptor) []byte {
	b = append(b, m.name...)
	for i, e := range m.entries {
		if e.HasValue {
			continue
		}
		v := d.Entries[i].Value
		b = append(b, '|')
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		b = append(b, v...)
	}
	return b
}

// cost is a descriptor's hits_addend, else the request's, at least 1
// (Envoy: unset means 1) and at most algo.MaxCount.
func cost(req *rlsv3.RateLimitRequest, d *rlcommon.RateLimitDescriptor) int64 {
	n := uint64(req.HitsAddend)
	if h := d.GetHitsAddend(); h != nil {
		n = h.Value
	}
	return int64(min(max(n, 1), algo.MaxCount))
}

// ShouldRateLimit implements RateLimitServiceServer: one atomic decision
// over the request's mapped descriptors.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if len(req.Descriptors) > MaxDescriptors {
		return nil, status.Errorf(codes.InvalidArgument, "%d descriptors: at most %d in one call", len(req.Descriptors), MaxDescriptors)
	}
	rt := s.rt.Load()
	c := s.calls.Get().(*call)
	defer s.calls.Put(c)
	c.keyed, c.owner, c.routes = c.keyed[:0], c.owner[:0], c.routes[:0]
	ms := rt.domains[req.Domain]
	for di, d := range req.Descriptors {
		m := match(ms, d)
		if m == nil {
			continue
		}
		c.buf = clientID(c.buf[:0], m, d)
		id := string(c.buf)
		for i, p := range m.policies {
			c.keyed = append(c.keyed, policy.Keyed{Policy: p, Counters: m.counters[i], Client: id, Cost: cost(req, d)})
			c.owner = append(c.owner, di)
			c.routes = append(c.routes, m.name)
		}
	}
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(req.Descriptors))}
	for i := range resp.Statuses {
		resp.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	}
	if len(c.keyed) == 0 {
		return resp, nil
	}
	res := &c.res
	start := time.Now()
	rt.lim.DecideKeyed(ctx, c.keyed, res)
	s.metrics.ObserveDecision(time.Since(start))
	switch res.Outcome {
	case policy.Unavailable:
		return nil, status.Error(codes.Unavailable, "the rate limiter cannot decide right now and a policy fails closed")
	case policy.Refuse:
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		s.logRefusal(rt, c)
	}
	if res.Outcome == policy.Pass && res.Wait > 0 && !s.wait(ctx, rt, c) {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	fillStatuses(resp, c)
	resp.ResponseHeadersToAdd = headers(rt.cfg.Response.Headers, res)
	return resp, nil
}

// wait serves an accepted leaky-bucket wait by waiting before answering,
// as forward-auth does; a wait beyond server.max_wait is refused and its
// charge refunded (a refused request is charged by none). False: refused,
// or the caller went away.
func (s *Service) wait(ctx context.Context, rt *runtime, c *call) bool {
	res := &c.res
	d := time.Duration(res.Wait) * time.Millisecond
	if d > rt.cfg.Server.MaxWait {
		rt.lim.Refund(res)
		s.metrics.ShapingRefusal(c.routes[0], metrics.CapMaxWait)
		res.RetryAfter = res.Wait
		res.Outcome = policy.Refuse
		return false
	}
	return proxy.Hold(ctx, d, s.metrics, nil)
}

// fillStatuses sets each mapped descriptor's status from its items: over
// limit when one of its policies refused; current_limit, limit_remaining
// and duration_until_reset from its binding policy (fewest remaining, then
// longest reset, as the quota headers choose).
func fillStatuses(resp *rlsv3.RateLimitResponse, c *call) {
	res := &c.res
	for di, st := range resp.Statuses {
		bind := -1
		for i := range res.Items {
			it := &res.Items[i]
			if c.owner[i] != di || it.Unknown {
				continue
			}
			if it.Status == policy.Rejected {
				st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			}
			if bind < 0 {
				bind = i
				continue
			}
			b, d := &res.Items[bind].Decision, &it.Decision
			if d.Remaining < b.Remaining || (d.Remaining == b.Remaining && d.ResetAfter > b.ResetAfter) {
				bind = i
			}
		}
		if bind < 0 {
			continue
		}
		it := &res.Items[bind]
		st.CurrentLimit = currentLimit(it.Policy)
		// limit_remaining is a uint32 in the proto: larger values are clamped.
		st.LimitRemaining = uint32(min(max(it.Decision.Remaining, 0), 1<<32-1))
		st.DurationUntilReset = durationpb.New(time.Duration(it.Decision.ResetAfter) * time.Millisecond)
	}
}

// units are the RateLimit units from the longest, with their length in ms.
var units = [...]struct {
	ms   int64
	unit rlsv3.RateLimitResponse_RateLimit_Unit
}{
	{86_400_000, rlsv3.RateLimitResponse_RateLimit_DAY},
	{3_600_000, rlsv3.RateLimitResponse_RateLimit_HOUR},
	{60_000, rlsv3.RateLimitResponse_RateLimit_MINUTE},
	{1000, rlsv3.RateLimitResponse_RateLimit_SECOND},
}

// currentLimit is p's limit as Envoy's RateLimit: Count requests per
// Period, in the longest unit dividing the period (with unit_multiplier
// when more than one); nil when the period is not whole seconds. For the
// buckets it is the sustained rate (the burst is not expressible).
func currentLimit(p *policy.Policy) *rlsv3.RateLimitResponse_RateLimit {
	l := p.Limit
	for _, u := range units {
		if l.Period%u.ms != 0 {
			continue
		}
		rl := &rlsv3.RateLimitResponse_RateLimit{Name: p.Name, RequestsPerUnit: uint32(l.Count), Unit: u.unit}
		if k := l.Period / u.ms; k > 1 {
			rl.UnitMultiplier = wrapperspb.UInt32(uint32(k))
		}
		return rl
	}
	return nil
}

// headers are the quota headers of res (response.headers, plus Retry-After
// on a refusal) as Envoy header values, sorted by name.
func headers(sets config.HeaderSet, res *policy.Result) []*corev3.HeaderValue {
	h := http.Header{}
	proxy.QuotaHeaders(h, sets, res)
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]*corev3.HeaderValue, 0, len(names))
	for _, k := range names {
		for _, v := range h[k] {
			out = append(out, &corev3.HeaderValue{Key: k, Value: v})
		}
	}
	return out
}

// logRefusal logs a refused call (sampled), as the proxy logs a refused request.
func (s *Service) logRefusal(rt *runtime, c *call) {
	res := &c.res
	if s.log == nil || res.Binding < 0 {
		return
	}
	ok, suppressed := rt.refusal.Allow(time.Now())
	if !ok {
		return
	}
	it := &res.Items[res.Binding]
	s.log.Info("request refused",
		"route", c.routes[res.Binding],
		"policy", it.Policy.Name,
		"key", res.DisplayKeyFor(res.Binding, func(id string) string { return s.clients.Show(id, rt.cfg.Admin.ShowClientIPs) }),
		"decision", it.Status.String(),
		"retry_after_ms", res.RetryAfter,
		"interface", "envoy_rls",
		"suppressed", suppressed)
}
