package algo

import "testing"

// TestDescriptors: every Kind has a descriptor at its own index, and the
// names, labels, key codes and places in the contract's list are unique,
// so no two algorithms share a config value, a store key or a column.
func TestDescriptors(t *testing.T) {
	seen := map[string]Kind{}
	listed := map[int]bool{}
	for i, a := range Kinds() {
		if a.Kind != Kind(i+1) || Describe(a.Kind) != a {
			t.Errorf("%s: Kind %d at index %d", a.Name, a.Kind, i+1)
		}
		for _, v := range []string{"name:" + a.Name, "label:" + a.Label, "code:" + a.Code} {
			if k, dup := seen[v]; dup {
				t.Errorf("%s shared by %v and %v", v, k, a.Kind)
			}
			seen[v] = a.Kind
		}
		if listed[a.Listed] || a.Listed < 1 || a.Listed > len(Kinds()) {
			t.Errorf("%s: Listed %d", a.Name, a.Listed)
		}
		listed[a.Listed] = true
		if a.Kind.String() != a.Label {
			t.Errorf("%v: String %q, Label %q", a.Kind, a.Kind.String(), a.Label)
		}
	}
	if Describe(0) != nil || Describe(Kind(len(Kinds())+1)) != nil {
		t.Error("Describe of an unknown kind is not nil")
	}
	if got := Kind(99).String(); got != "Kind(99)" {
		t.Errorf("Kind(99).String() = %q", got)
	}
}

// TestQuotaRules: the quota each descriptor's rule gives (q of
// RateLimit-Policy, docs/CONTRACT.md).
func TestQuotaRules(t *testing.T) {
	for _, tt := range []struct {
		l    Limit
		want int64
	}{
		{Limit{Kind: FixedWindow, Count: 7, Period: 1000}, 7},
		{Limit{Kind: SlidingLog, Count: 7, Period: 1000}, 7},
		{Limit{Kind: SlidingWindow, Count: 7, Period: 1000}, 7},
		{Limit{Kind: TokenBucket, Count: 7, Period: 1000, Burst: 3}, 3},
		{Limit{Kind: LeakyBucket, Count: 7, Period: 1000, Burst: 3}, 4},
		{Limit{Kind: Concurrency, Count: 7, Period: 1000}, 7},
	} {
		if got := tt.l.Quota(); got != tt.want {
			t.Errorf("%v: Quota %d, want %d", &tt.l, got, tt.want)
		}
	}
}
