package policy

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/netip"
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/config"
	"rlproxy/internal/store"
	"rlproxy/internal/store/memory"
)

// refundDown is a store that cannot decide (the fail-open floor decides).
type refundDown struct{}

var errRefundDown = errors.New("store down")

func (refundDown) Decide(context.Context, []store.Check, int64, []algo.Decision) (int64, error) {
	return 0, errRefundDown
}
func (refundDown) Release(context.Context, []store.Check) error       { return nil }
func (refundDown) Refund(context.Context, []store.Check, int64) error { return errRefundDown }
func (refundDown) Close() error                                       { return nil }

func refundLimiter(t *testing.T, st, floor store.Store) (*Limiter, *Route) {
	t.Helper()
	return refundLimiterOpts(t, Options{Store: st, Floor: floor, LeasePrefix: "t-"})
}

// refundLimiterOpts is refundLimiter's configuration with opts.
func refundLimiterOpts(t *testing.T, opts Options) (*Limiter, *Route) {
	t.Helper()
	cfg, err := config.ParseWith("refund.yaml", []byte(`
upstreams: { app: { url: "http://127.0.0.1:1" } }
policies:
  shape: { algorithm: leaky_bucket, rate: 10r/s, burst: 20, key: ip, fallback: { rate: 1r/m, burst: 3 } }
  hourly: { algorithm: fixed_window, limit: 100, window: 1h, key: ip, dry_run: true }
  inflight: { algorithm: concurrency, limit: 2, key: ip }
routes: [ { name: all, upstream: app, policies: [shape, hourly, inflight] } ]
`), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l, l.Routes()[0]
}

// TestLimiterRefund: Refund of a Pass decision undoes every charge it made
// — the enforcing policies (leaky bucket excess, the concurrency lease)
// and the dry-run one — so a peek shows the state of the requests before
// it; it runs once, and not for a refusal.
func TestLimiterRefund(t *testing.T) {
	st := memory.New(memory.Options{MaxKeys: 100, SweepInterval: -1})
	defer st.Close()
	l, rt := refundLimiter(t, st, nil)
	ip := netip.MustParseAddr("192.0.2.7")
	r := view(httptest.NewRequest("GET", "/a", nil))
	ctx := context.Background()
	var first, second Result
	if err := l.Decide(ctx, rt, r, ip, &first); err != nil || first.Outcome != Pass || first.Wait != 0 {
		t.Fatalf("first: %v %+v", err, first)
	}
	if err := l.Decide(ctx, rt, r, ip, &second); err != nil || second.Outcome != Pass || second.Wait < 90 || second.Wait > 100 {
		t.Fatalf("second: %v outcome %v wait %d, want Pass after ~100 ms", err, second.Outcome, second.Wait)
	}
	l.Refund(&second)
	l.Refund(&second) // once only
	if !second.Refunded() {
		t.Fatal("Refunded() false after Refund")
	}
	var peek Result
	if err := l.Peek(ctx, rt, r, ip, &peek); err != nil {
		t.Fatal(err)
	}
	// Only the first request charged: no excess yet (20 of the burst left;
	// the second would make it 19), 99 of 100, one of two leases.
	want := map[string]int64{"shape": 20, "hourly": 99, "inflight": 1}
	for _, it := range peek.Items {
		if it.Decision.Remaining != want[it.Policy.Name] {
			t.Errorf("%s: remaining %d after the refund, want %d", it.Policy.Name, it.Decision.Remaining, want[it.Policy.Name])
		}
	}
	// A refusal charged nothing: Refund must not touch the state.
	var refused Result
	refused.Outcome = Refuse
	l.Refund(&refused)
	if refused.Refunded() {
		t.Error("Refund ran for a refusal")
	}
}

// TestLimiterRefundFloor: with the store down, a fail-open policy's
// fallback floor decides; Refund undoes that floor charge.
func TestLimiterRefundFloor(t *testing.T) {
	floor := memory.New(memory.Options{MaxKeys: 100, SweepInterval: -1})
	defer floor.Close()
	l, rt := refundLimiter(t, refundDown{}, floor)
	ip := netip.MustParseAddr("192.0.2.8")
	r := view(httptest.NewRequest("GET", "/a", nil))
	var res Result
	if err := l.Decide(context.Background(), rt, r, ip, &res); err != nil || res.Outcome != Pass || res.Err == nil {
		t.Fatalf("decide on a down store: %v outcome %v err %v", err, res.Outcome, res.Err)
	}
	fb := *l.Policy("shape").Fallback
	key := res.KeyFor(0)
	peek := func() int64 {
		out := make([]algo.Decision, 1)
		if _, err := floor.Decide(context.Background(), []store.Check{{Key: key, Limit: fb}}, 0, out); err != nil {
			t.Fatal(err)
		}
		return out[0].Remaining
	}
	if n := peek(); n != 2 {
		t.Fatalf("floor before the refund: %d remaining, want 2 of 3", n)
	}
	l.Refund(&res)
	if n := peek(); n != 3 {
		t.Fatalf("floor after the refund: %d remaining, want 3 of 3", n)
	}
}

func (refundDown) Charge(context.Context, []store.Check, int64) error { return errRefundDown }
