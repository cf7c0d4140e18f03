package policy

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"rlproxy/internal/metrics"
	"rlproxy/internal/store"
	"rlproxy/internal/store/memory"
)

// cleanupDown decides through a memory store; its refunds and releases fail.
type cleanupDown struct{ *memory.Store }

func (cleanupDown) Release(context.Context, []store.Check) error {
	return errors.New("release failed")
}
func (cleanupDown) Refund(context.Context, []store.Check, int64) error {
	return errors.New("refund failed")
}

// TestCleanupErrorsCounted: a failed Refund or Release is counted by op in
// rlproxy_store_cleanup_errors_total and logged at debug, not dropped.
func TestCleanupErrorsCounted(t *testing.T) {
	ms := memory.New(memory.Options{MaxKeys: 100, SweepInterval: -1})
	defer ms.Close()
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	l, rt := refundLimiterOpts(t, Options{Store: cleanupDown{ms}, Metrics: metrics.New(reg, "test"), LeasePrefix: "t-",
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	r := view(httptest.NewRequest("GET", "/a", nil))
	ip := netip.MustParseAddr("192.0.2.7")
	var res Result
	if err := l.Decide(context.Background(), rt, r, ip, &res); err != nil || res.Outcome != Pass {
		t.Fatal(err, res.Outcome)
	}
	l.Release(&res)
	l.Refund(&res)
	got := map[string]float64{}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "rlproxy_store_cleanup_errors_total" {
			for _, m := range mf.GetMetric() {
				got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	// One release (the enforcing lease; the dry-run decision holds none),
	// two refunds (enforcing and dry-run decisions), no renewal.
	if got["release"] != 1 || got["refund"] != 2 || got["renew"] != 0 {
		t.Errorf("cleanup errors %v, want release 1, refund 2, renew 0", got)
	}
	if n := strings.Count(logs.String(), `msg="store cleanup failed"`); n != 3 || !strings.Contains(logs.String(), "level=DEBUG") {
		t.Errorf("%d debug lines, want 3:\n%s", n, logs.String())
	}
}

// TestRedactedKeyFor: the refusal log's key keeps the key's shape but only
// the redacted form of a hashed client id.
func TestRedactedKeyFor(t *testing.T) {
	id := "h:0123456789abcdef0123456789abcdef"
	res := Result{Items: []Item{{stage: stageEnforce}}}
	res.stages[stageEnforce].add(store.Check{Key: "rl:v2:{" + id + "}:api:tb"})
	if got, want := res.RedactedKeyFor(0), "rl:v2:{h:0123456789ab}:api:tb"; got != want {
		t.Errorf("RedactedKeyFor = %q, want %q", got, want)
	}
}
