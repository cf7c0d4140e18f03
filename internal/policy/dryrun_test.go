package policy

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/config"
	"rlproxy/internal/store"
	"rlproxy/internal/store/memory"
)

// dryDown decides through a memory store but fails every decision that
// includes a dry-run policy's key (they contain ":dry:").
type dryDown struct{ *memory.Store }

func (d dryDown) Decide(ctx context.Context, cks []store.Check, now int64, out []algo.Decision) (int64, error) {
	for _, c := range cks {
		if strings.Contains(c.Key, ":dry:") {
			return 0, errors.New("store down")
		}
	}
	return d.Store.Decide(ctx, cks, now, out)
}

// TestDryRunStoreErrorKeepsEnforcingOutcome: a store error on the dry-run
// decision alone leaves the enforcing decision standing — its wait is
// kept (the request is still shaped), its status and quota are reported —
// and only the dry-run policy counts as store_error. A dry-run policy's
// own wait never delays a request (nginx limit_req_dry_run).
func TestDryRunStoreErrorKeepsEnforcingOutcome(t *testing.T) {
	cfg, err := config.ParseWith("dry.yaml", []byte(`
upstreams: { app: { url: "http://127.0.0.1:1" } }
policies:
  shape: { algorithm: leaky_bucket, rate: 10r/s, burst: 5, key: ip }
  dry: { algorithm: leaky_bucket, rate: 1r/s, burst: 5, key: ip, dry_run: true }
routes: [ { name: all, upstream: app, policies: [shape, dry] } ]
`), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ms := memory.New(memory.Options{MaxKeys: 100, SweepInterval: -1})
	defer ms.Close()
	ip := netip.MustParseAddr("192.0.2.9")
	r := view(httptest.NewRequest("GET", "/", nil))
	ctx := context.Background()

	down, err := New(cfg, Options{Store: dryDown{ms}})
	if err != nil {
		t.Fatal(err)
	}
	rt := down.Routes()[0]
	var res Result
	for i := range 2 {
		if err := down.Decide(ctx, rt, r, ip, &res); err != nil {
			t.Fatal(err)
		}
		shape, dry := res.Items[0], res.Items[1]
		if res.Outcome != Pass || shape.Status == StoreError || dry.Status != StoreError || !dry.Unknown || shape.Unknown {
			t.Fatalf("request %d: outcome %v, shape %v (unknown %v), dry %v (unknown %v); want pass, shape decided, dry store_error",
				i+1, res.Outcome, shape.Status, shape.Unknown, dry.Status, dry.Unknown)
		}
		if i == 1 && (shape.Status != Delayed || res.Wait < 90 || res.Wait > 100 || shape.Decision.Remaining != 4) {
			t.Fatalf("second request: shape %v wait %d ms remaining %d; want delayed ~100 ms with 4 remaining",
				shape.Status, res.Wait, shape.Decision.Remaining)
		}
	}

	// With the store up, the dry-run policy's 1 s wait does not delay.
	up, err := New(cfg, Options{Store: memory.New(memory.Options{MaxKeys: 100, SweepInterval: -1})})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := up.Decide(ctx, up.Routes()[0], r, ip, &res); err != nil {
			t.Fatal(err)
		}
	}
	if dry := res.Items[1]; dry.Status != Delayed || dry.Decision.Wait < 900 || res.Wait > 100 {
		t.Fatalf("dry-run delay: dry %v wait %d ms, request wait %d ms; want the dry-run wait ~1 s reported, the request waiting only the enforcing ~100 ms",
			dry.Status, dry.Decision.Wait, res.Wait)
	}
}
