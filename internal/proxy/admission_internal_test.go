package proxy

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/adaptive"
	"rlproxy/internal/algo"
	"rlproxy/internal/config"
	"rlproxy/internal/policy"
	"rlproxy/internal/reqview"
	"rlproxy/internal/store"
	"rlproxy/internal/store/memory"
	"rlproxy/internal/testutil/waitfor"
)

// countingStore is the memory store, counting the decisions asked of it
// (a lease renewal is one).
type countingStore struct {
	store.Store
	decides atomic.Int64
}

func (c *countingStore) Decide(ctx context.Context, checks []store.Check, now int64, out []algo.Decision) (int64, error) {
	c.decides.Add(1)
	return c.Store.Decide(ctx, checks, now, out)
}

// admissionServer builds a Server over a memory store for the policies
// and routes of yaml (upstream app), with the given server section.
func admissionServer(t *testing.T, yaml string) (*Server, *countingStore) {
	t.Helper()
	cfg, err := config.ParseWith("admission.yaml", []byte(`
upstreams: { app: { url: "http://127.0.0.1:1" } }
`+yaml), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ms := memory.New(memory.Options{MaxKeys: 1000, SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	cs := &countingStore{Store: ms}
	l, err := policy.New(cfg, policy.Options{Store: cs})
	if err != nil {
		t.Fatal(err)
	}
	return New(&Runtime{Config: cfg, Limiter: l}, nil, nil), cs
}

// fakeResponse is an engine's recorder at the end of a response.
type fakeResponse struct {
	status   int
	costs    map[string]int64
	tooLarge bool
}

func (f *fakeResponse) finalStatus() int { return f.status }
func (f *fakeResponse) cost(name string) (int64, bool) {
	c, ok := f.costs[name]
	return c, ok
}
func (f *fakeResponse) bodyTooLarge() bool { return f.tooLarge }
func (f *fakeResponse) sampled() bool      { return false }

var admissionIP = netip.MustParseAddr("192.0.2.9")

// admit begins and decides an admission on the server's first route.
func admit(t *testing.T, s *Server) *admission {
	t.Helper()
	rt := s.Runtime()
	a := &admission{}
	a.begin(s, rt, rt.Limiter.Routes()[0])
	v, _ := reqview.Read(httptest.NewRequest("GET", "/x", nil))
	a.decide(context.Background(), &v, admissionIP)
	return a
}

// remaining is the remaining quota of the first route's first policy,
// peeked without charging.
func remaining(t *testing.T, s *Server) int64 {
	t.Helper()
	rt := s.Runtime()
	v, _ := reqview.Read(httptest.NewRequest("GET", "/x", nil))
	var res policy.Result
	if err := rt.Limiter.Peek(context.Background(), rt.Limiter.Routes()[0], &v, admissionIP, &res); err != nil {
		t.Fatal(err)
	}
	return res.Items[0].Decision.Remaining
}

// TestAdmissionSettlesOnce: a response that ended settles by its status
// (count_status refunds an uncounted one), exactly once however often
// finish is called; the decision's record goes back to the pool.
func TestAdmissionSettlesOnce(t *testing.T) {
	s, _ := admissionServer(t, `
policies:
  fails: { algorithm: fixed_window, limit: 5, window: 1h, key: ip, count_status: [500] }
routes: [{ name: r, upstream: app, policies: [fails] }]
`)
	for _, tc := range []struct {
		status int
		want   int64
	}{{200, 5}, {500, 4}, {200, 4}, {500, 3}} {
		a := admit(t, s)
		if a.state != admHeld || a.decision != decisionAllowed {
			t.Fatalf("after decide: state %d, decision %q; want held, allowed", a.state, a.decision)
		}
		if a.wait(context.Background()) != waited {
			t.Fatal("a request without a wait did not pass its wait")
		}
		a.answered()
		resp := &fakeResponse{status: tc.status}
		a.finish(resp)
		a.finish(resp) // a second call changes nothing
		if a.res != nil || a.state != admFinished {
			t.Fatalf("after finish: res %p, state %d; want nil, finished", a.res, a.state)
		}
		if got := remaining(t, s); got != tc.want {
			t.Fatalf("status %d: remaining %d, want %d", tc.status, got, tc.want)
		}
	}
}

// TestAdmissionCost: a route with a cost_response_header settles with the
// response's cost: a dearer one charges the difference.
func TestAdmissionCost(t *testing.T) {
	s, _ := admissionServer(t, `
policies:
  tokens: { algorithm: fixed_window, limit: 100, window: 1h, key: ip }
routes: [{ name: r, upstream: app, policies: [tokens], cost_response_header: X-Cost }]
`)
	a := admit(t, s)
	a.answered()
	a.finish(&fakeResponse{status: 200, costs: map[string]int64{"X-Cost": 7}})
	if got := remaining(t, s); got != 93 {
		t.Fatalf("remaining %d after a response of cost 7, want 93", got)
	}
}

// TestAdmissionPanicReleases: a response cut by a panic is not settled
// (its charge stands as decided), but its concurrency lease is released
// and its renewal stopped by the one deferred finish.
func TestAdmissionPanicReleases(t *testing.T) {
	s, cs := admissionServer(t, `
policies:
  fails: { algorithm: fixed_window, limit: 5, window: 1h, key: ip, count_status: [500] }
  one: { algorithm: concurrency, limit: 1, lease: 150ms, key: ip }
routes: [{ name: r, upstream: app, policies: [fails, one] }]
`)
	var a *admission
	func() {
		defer func() { _ = recover() }()
		a = admit(t, s)
		defer a.finish(&fakeResponse{status: 200})
		if a.stop == nil {
			t.Fatal("a lease is held but no renewal runs")
		}
		// The renewal runs while the request does (every 50 ms).
		before := cs.decides.Load()
		waitfor.True(t, "a lease renewal", func() bool { return cs.decides.Load() != before })
		panic("response cut")
	}()
	if a.stop != nil || a.state != admFinished {
		t.Fatalf("after a panic: renewal %v, state %d; want stopped, finished", a.stop != nil, a.state)
	}
	// finish joined the renewal goroutine: no decision is asked from now
	// on but the next request's.
	n := cs.decides.Load()
	time.Sleep(200 * time.Millisecond) // more than three renewal periods
	if got := cs.decides.Load(); got != n {
		t.Fatalf("%d store decisions after finish, want none (renewal not stopped)", got-n)
	}
	if got := remaining(t, s); got != 4 {
		t.Fatalf("remaining %d after a cut response, want 4 (charged, not settled)", got)
	}
	b := admit(t, s) // the lease is free again
	if b.state != admHeld {
		t.Fatalf("next request: outcome %v, want allowed (lease released)", b.res.Outcome)
	}
	b.finish(&fakeResponse{status: 499})
}

// TestAdmissionShapingCap: a wait beyond server.max_wait is refused and
// refunded (the bucket is as before it), and the lease it held is
// released at once, before finish.
func TestAdmissionShapingCap(t *testing.T) {
	s, _ := admissionServer(t, `
server: { max_wait: 100ms }
policies:
  shape: { algorithm: leaky_bucket, rate: 1r/s, burst: 5, key: ip }
  one: { algorithm: concurrency, limit: 2, key: ip }
routes: [{ name: r, upstream: app, policies: [shape, one] }]
`)
	first := admit(t, s) // no wait: holds one lease
	defer first.finish(&fakeResponse{status: 200})
	before := remaining(t, s)
	a := admit(t, s)
	if a.res.Wait <= 100 {
		t.Fatalf("second request waits %d ms, want more than max_wait", a.res.Wait)
	}
	if got := a.wait(context.Background()); got != capped || a.state != admRefunded || a.decision != decisionRejected {
		t.Fatalf("wait: %d, state %d, decision %q; want capped, refunded, rejected", got, a.state, a.decision)
	}
	if got := remaining(t, s); got != before {
		t.Fatalf("remaining %d after the refund, want %d", got, before)
	}
	b := admit(t, s) // the refunded request's lease is free: limit 2 admits one more
	if b.res.Outcome != policy.Pass {
		t.Fatalf("third request: outcome %v, want pass (the capped one's lease released)", b.res.Outcome)
	}
	b.finish(&fakeResponse{status: 499})
	a.finish(&fakeResponse{status: 429})
	if s.Waiting() != 0 {
		t.Fatalf("%d requests still counted as waiting", s.Waiting())
	}
}

// TestAdmissionClientLeftWaiting: a client that leaves during its wait is
// not forwarded and stays charged; finish settles it as 499.
func TestAdmissionClientLeftWaiting(t *testing.T) {
	s, _ := admissionServer(t, `
policies:
  shape: { algorithm: leaky_bucket, rate: 1r/s, burst: 5, key: ip, count_status: [499] }
routes: [{ name: r, upstream: app, policies: [shape] }]
`)
	first := admit(t, s)
	first.answered()
	first.finish(&fakeResponse{status: 200}) // refunded: 200 is not counted
	first = admit(t, s)                      // charged; the next one waits behind it
	defer first.finish(&fakeResponse{status: 499})
	a := admit(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := a.wait(ctx); got != gone || a.state != admLeft || a.decision != decisionDelayed {
		t.Fatalf("wait: %d, state %d, decision %q; want gone, left, delayed", got, a.state, a.decision)
	}
	before := remaining(t, s)
	a.finish(&fakeResponse{status: 200}) // the response never came: settles as 499, counted
	if got := remaining(t, s); got != before {
		t.Fatalf("remaining %d after settling 499, want %d (counted: stays charged)", got, before)
	}
}

// TestAdmissionShed: a request shed by the upstream's adaptive gate is
// refunded as a shaping-cap refusal is and its lease released at once;
// the slot an admitted request holds is freed by finish.
func TestAdmissionShed(t *testing.T) {
	s, _ := admissionServer(t, `
policies:
  hourly: { algorithm: fixed_window, limit: 10, window: 1h, key: ip }
  two: { algorithm: concurrency, limit: 2, key: ip }
routes: [{ name: r, upstream: app, policies: [hourly, two] }]
`)
	gate := adaptive.NewGate("app", adaptive.Config{Min: 1, Max: 1, Initial: 1, Window: time.Second, Tolerance: 0.1},
		[]adaptive.Class{{Name: "default", Share: 1}}, time.Now())
	first := admit(t, s)
	if _, ok := first.acquire(context.Background(), gate, 0, []byte("c")); !ok || !first.slot.Held() {
		t.Fatal("the first request got no slot of a free gate")
	}
	second := admit(t, s)
	if got := remaining(t, s); got != 8 {
		t.Fatalf("remaining %d with two requests charged, want 8", got)
	}
	ra, ok := second.acquire(context.Background(), gate, 0, []byte("c"))
	if ok || ra < 1 || second.decision != decisionShed || second.state != admRefunded {
		t.Fatalf("second request: ok %v, retry after %d s, decision %q, state %d; want shed, ≥ 1 s, refunded", ok, ra, second.decision, second.state)
	}
	if got := remaining(t, s); got != 9 {
		t.Fatalf("remaining %d after the shed request's refund, want 9", got)
	}
	third := admit(t, s) // the shed request's lease is free: limit 2 admits one more
	if third.state != admHeld {
		t.Fatalf("third request: outcome %v, want pass (the shed one's lease released)", third.res.Outcome)
	}
	second.finish(&fakeResponse{status: 503})
	first.answered()
	first.finish(&fakeResponse{status: 200})
	if first.slot.Held() {
		t.Fatal("finish kept the slot")
	}
	if _, ok := third.acquire(context.Background(), gate, 0, []byte("c")); !ok {
		t.Fatal("no slot after the first request finished")
	}
	third.finish(&fakeResponse{status: 499})
}
