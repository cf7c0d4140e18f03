package policy

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/store/memory"
)

// TestRecordReuse: a pooled Result records only its own request. After a
// decision the fallback floor made (store down, client A), the same Result
// decides client B with the store up: it names B's key, holds B's lease,
// and its Refund undoes B's charges only — A's floor charge stays (a
// reused scratch slice once carried the previous client's floor checks).
func TestRecordReuse(t *testing.T) {
	ms := memory.New(memory.Options{MaxKeys: 100, SweepInterval: -1})
	defer ms.Close()
	fl := memory.New(memory.Options{MaxKeys: 100, SweepInterval: -1})
	defer fl.Close()
	st := &slowStore{Store: ms, broken: true}
	l, rt := refundLimiter(t, st, fl)
	r := view(httptest.NewRequest("GET", "/a", nil))
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	ctx := context.Background()
	var res Result
	if err := l.Decide(ctx, rt, r, a, &res); err != nil || res.Outcome != Pass || res.Err == nil {
		t.Fatalf("A on a down store: %v outcome %v err %v", err, res.Outcome, res.Err)
	}
	if res.HasLeases() {
		t.Error("a floor decision holds leases; it never asked the store for one")
	}
	keyA := res.KeyFor(0)
	floorLeft := func() int64 {
		out := make([]algo.Decision, 1)
		if _, err := fl.Decide(ctx, []store.Check{{Key: keyA, Limit: *l.Policy("shape").Fallback}}, 0, out); err != nil {
			t.Fatal(err)
		}
		return out[0].Remaining
	}
	if n := floorLeft(); n != 2 {
		t.Fatalf("A's floor: %d remaining, want 2 of 3", n)
	}

	st.broken = false
	if err := l.Decide(ctx, rt, r, b, &res); err != nil || res.Outcome != Pass || res.Err != nil {
		t.Fatalf("B on the store: %v outcome %v err %v", err, res.Outcome, res.Err)
	}
	for i := range res.Items {
		if k := res.KeyFor(i); !strings.Contains(k, "192.0.2.2") {
			t.Errorf("item %d key %q: not B's", i, k)
		}
	}
	if !res.HasLeases() || res.LeaseRenewEvery() <= 0 {
		t.Errorf("B: leases %v, renew every %v; want B's lease held", res.HasLeases(), res.LeaseRenewEvery())
	}
	l.Refund(&res)
	if res.HasLeases() {
		t.Error("a refunded Result still holds leases")
	}
	if n := floorLeft(); n != 2 {
		t.Errorf("A's floor after B's refund: %d remaining, want 2 (untouched)", n)
	}
	var peek Result
	if err := l.Peek(ctx, rt, r, b, &peek); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"shape": 21, "hourly": 100, "inflight": 2} // a fresh client: burst + 1 for the leaky bucket
	for _, it := range peek.Items {
		if it.Decision.Remaining != want[it.Policy.Name] {
			t.Errorf("B's %s after the refund: remaining %d, want %d", it.Policy.Name, it.Decision.Remaining, want[it.Policy.Name])
		}
	}
}
