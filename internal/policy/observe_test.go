package policy

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"rlproxy/internal/algo"
	"rlproxy/internal/config"
	"rlproxy/internal/metrics"
	"rlproxy/internal/store"
	"rlproxy/internal/store/memory"
)

// slowStore decides through a memory store, except that while gone is
// set it waits for the caller's context to end and returns its error (a
// store that has not answered when the client leaves), and while broken is
// set it fails (a store that answered with an error).
type slowStore struct {
	*memory.Store
	gone, broken bool
}

func (s *slowStore) Decide(ctx context.Context, cks []store.Check, now int64, out []algo.Decision) (int64, error) {
	switch {
	case s.gone:
		<-ctx.Done()
		return 0, ctx.Err()
	case s.broken:
		return 0, errors.New("store down")
	}
	return s.Store.Decide(ctx, cks, now, out)
}

// gauge returns the value of the unlabelled metric name in reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestCallerLeftIsNoStoreVerdict: a decision whose client left before the
// store answered (its context canceled) neither counts as a store error
// nor marks the store down; a store that fails does both.
func TestCallerLeftIsNoStoreVerdict(t *testing.T) {
	cfg, err := config.ParseWith("observe.yaml", []byte(`
upstreams: { app: { url: "http://127.0.0.1:1" } }
policies:
  api: { algorithm: token_bucket, rate: 10r/s, burst: 5, key: ip }
routes: [ { name: all, upstream: app, policies: [api] } ]
`), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ms := memory.New(memory.Options{MaxKeys: 100, SweepInterval: -1})
	defer ms.Close()
	st := &slowStore{Store: ms}
	reg := prometheus.NewRegistry()
	l, err := New(cfg, Options{Store: st, Metrics: metrics.New(reg, "test")})
	if err != nil {
		t.Fatal(err)
	}
	rt := l.Routes()[0]
	r := view(httptest.NewRequest("GET", "/", nil))
	ip := netip.MustParseAddr("192.0.2.9")
	var res Result
	decide := func(ctx context.Context) {
		t.Helper()
		if err := l.Decide(ctx, rt, r, ip, &res); err != nil {
			t.Fatal(err)
		}
	}

	decide(context.Background())
	if up, errs := gauge(t, reg, "rlproxy_store_up"), gauge(t, reg, "rlproxy_store_errors_total"); up != 1 || errs != 0 {
		t.Fatalf("after a decision: store_up %v, store_errors %v; want 1, 0", up, errs)
	}
	st.gone = true
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	decide(ctx)
	if res.Err == nil {
		t.Fatal("decision of a caller that left: no error")
	}
	if up, errs := gauge(t, reg, "rlproxy_store_up"), gauge(t, reg, "rlproxy_store_errors_total"); up != 1 || errs != 0 {
		t.Errorf("after a caller left: store_up %v, store_errors %v; want 1, 0 (no verdict on the store)", up, errs)
	}
	st.gone, st.broken = false, true
	decide(context.Background())
	// The policy layer marks the store down; counting the failed round
	// trip is the store's (valkey.Options.OnRoundTrip: one per batch, not
	// one per decision in it), so this decision adds none here.
	if up, errs := gauge(t, reg, "rlproxy_store_up"), gauge(t, reg, "rlproxy_store_errors_total"); up != 0 || errs != 0 {
		t.Errorf("after a store error: store_up %v, store_errors %v; want 0, 0", up, errs)
	}
}
