package valkey

import (
	"regexp"
	"strings"
	"testing"

	"rlproxy/internal/algo"
)

// TestScriptParts: the script holds, for every algorithm, the functions
// its descriptor promises (lua/prelude.lua lists them), and no Lua file
// writes a kind number: the only kind comparisons are in the generated
// dispatch function.
func TestScriptParts(t *testing.T) {
	src := Script()
	for _, a := range algo.Kinds() {
		names := []string{a.Name, "refund_" + a.Name}
		if a.Charges() {
			names = append(names, "charge_"+a.Name)
		}
		if !a.Leases {
			names = append(names, "quota_"+a.Name)
		}
		if a.Has("calendar") {
			names = append(names, a.Name+"_calendar", "refund_"+a.Name+"_calendar", "charge_"+a.Name+"_calendar")
		}
		if a.Slices != algo.SliceNone {
			names = append(names, "allot_"+a.Name)
			if a.Has("calendar") {
				names = append(names, "allot_"+a.Name+"_calendar")
			}
		}
		for _, n := range names {
			if !strings.Contains(src, "local function "+n+"(") {
				t.Errorf("%s: no function %s in lua/%s.lua", a.Name, n, a.Name)
			}
		}
	}
	files, err := luaFiles.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	kindNumber := regexp.MustCompile(`kind\s*[=~<>]=?\s*\d`)
	for _, f := range files {
		b, _ := luaFiles.ReadFile("lua/" + f.Name())
		if m := kindNumber.Find(b); m != nil {
			t.Errorf("lua/%s compares a kind with a number: %q", f.Name(), m)
		}
	}
	if got := strings.Count(dispatchLua(), "kind == "); got != len(algo.Kinds())+2 {
		t.Errorf("the dispatch function tests %d kinds, want %d (with two calendar kinds)", got, len(algo.Kinds())+2)
	}
}

// TestScriptKind: the kind argument of a calendar window follows the
// algorithm kinds (lua/dispatch.lua's calendar_kinds), one per algorithm
// that takes calendar periods, in Kind order; others send their algo.Kind.
func TestScriptKind(t *testing.T) {
	cal, err := algo.NewCalendar(algo.Month, "UTC")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		l    algo.Limit
		want int
	}{
		{algo.Limit{Kind: algo.TokenBucket}, 4},
		{algo.Limit{Kind: algo.Concurrency}, 6},
		{algo.Limit{Kind: algo.FixedWindow, Calendar: cal}, 7},
		{algo.Limit{Kind: algo.SlidingWindow, Calendar: cal}, 8},
	} {
		if got := scriptKind(&tt.l); got != tt.want {
			t.Errorf("%v: script kind %d, want %d", tt.l.Kind, got, tt.want)
		}
	}
}
