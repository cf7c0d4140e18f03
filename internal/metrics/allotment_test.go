package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeAllotments is an AllotmentStats with fixed figures per policy.
type fakeAllotments map[string][2]int64

func (f *fakeAllotments) EachAllotment(fn func(policy string, outstanding int64, fetches uint64)) {
	for p, v := range *f {
		fn(p, v[0], uint64(v[1]))
	}
}

// TestAllotments: the layer's figures per policy; a swap (a reload that
// builds a new store) keeps fetches monotonic and drops the old units.
func TestAllotments(t *testing.T) {
	m := New(prometheus.NewRegistry(), "test")
	m.SetAllotments(&fakeAllotments{"api": {40, 7}, "gone": {3, 2}})
	m.SetAllotments(&fakeAllotments{"api": {12, 1}})
	out := scrape(t, m)
	for series, v := range map[string]string{
		`rlproxy_allotment_outstanding_units{policy="api"}`:  "12",
		`rlproxy_allotment_fetches_total{policy="api"}`:      "8",
		`rlproxy_allotment_fetches_total{policy="gone"}`:     "2",
		`rlproxy_allotment_outstanding_units{policy="gone"}`: "",
	} {
		if got := sample(out, series); got != v {
			t.Errorf("%s = %q, want %q", series, got, v)
		}
	}
}
