package valkey

import (
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// TestScriptArgs pins the ARGV layout of lua/dispatch.lua (now, mode, n, then
// kind, count, period, burst, delay, nodelay, cost, lease per check) as
// built through the limit cache, which must hand back one entry per
// distinct limit and never mix two limits up.
func TestScriptArgs(t *testing.T) {
	s := &Store{}
	tb := algo.Limit{Kind: algo.TokenBucket, Count: 1000000, Period: 1000, Burst: 250}
	lb := algo.Limit{Kind: algo.LeakyBucket, Count: 10, Period: 1000, Burst: 20, NoDelay: true}
	checks := []store.Check{
		{Key: "rl:v2:{ip:1}:a:tb", Limit: tb, Cost: 3},
		{Key: "rl:v2:{ip:1}:b:lb", Limit: lb, Cost: 1, Lease: "x"},
	}
	var b call
	for range 2 { // the second round reads the cache
		s.scriptArgs(&b, modeDecide, checks, 1700000000123)
		want := []string{"1700000000123", "0", "1",
			itoa(int64(algo.TokenBucket)), "1000000", "1000", "250", "0", "0", "3", "",
			itoa(int64(algo.LeakyBucket)), "10", "1000", "20", "0", "1", "1", "x"}
		if len(b.args) != 3+argsPerCheck*len(checks) || len(b.args) != len(want) {
			t.Fatalf("args %q", b.args)
		}
		for i := range want {
			if b.args[i] != want[i] {
				t.Errorf("arg %d = %q, want %q (all %q)", i, b.args[i], want[i], b.args)
			}
		}
		if len(b.keys) != 2 || b.keys[0] != checks[0].Key || b.keys[1] != checks[1].Key {
			t.Errorf("keys %q", b.keys)
		}
	}
	if a1, a2 := s.limits.get(&tb), s.limits.get(&tb); a1 != a2 {
		t.Error("one limit, two cache entries")
	}
	if m := s.limits.m.Load(); m == nil || len(*m) != 2 {
		t.Errorf("cache holds %v, want the 2 limits", m)
	}
	// Past the bound, limits are formatted per call, still right.
	for i := range maxCachedLimits + 10 {
		l := algo.Limit{Kind: algo.FixedWindow, Count: int64(i + 1), Period: 60000}
		if got := s.limits.get(&l); got[1] != itoa(int64(i+1)) || got[2] != "60000" {
			t.Fatalf("limit %d formatted as %q", i, got)
		}
	}
	if n := len(*s.limits.m.Load()); n != maxCachedLimits {
		t.Errorf("cache grew to %d, bound %d", n, maxCachedLimits)
	}
}

func itoa(n int64) string {
	var b []byte
	if n == 0 {
		return "0"
	}
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
