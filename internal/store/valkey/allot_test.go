package valkey

import (
	"context"
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// TestAllotFixedWindow: a slice is at most the fraction of what is left,
// charged at once (a decision sees it), and a refund of its unused units
// at the fetch's time gives them back exactly.
func TestAllotFixedWindow(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	l := algo.Limit{Kind: algo.FixedWindow, Count: 100, Period: 1000}
	ck := store.Check{Key: "rl:fw", Limit: l, Cost: 80}
	now := base + 200
	used, got, left, reset, err := st.Allot(ctx, ck, 500, now)
	if err != nil || used != now || got != 50 || left != 50 || reset != 800 {
		t.Fatalf("Allot = %d, %d, %d, %d, %v; want %d, 50, 50, 800", used, got, left, reset, err, now)
	}
	if d := decide1(t, st, "rl:fw", l, 0, "", now+1); d.Remaining != 50 {
		t.Fatalf("after the slice: remaining %d, want 50", d.Remaining)
	}
	if _, got, _, _, _ = st.Allot(ctx, store.Check{Key: "rl:fw", Limit: l, Cost: 10}, 500, now+2); got != 10 {
		t.Fatalf("second slice %d, want 10 (want < half of 50)", got)
	}
	ret := []store.Check{{Key: "rl:fw", Limit: l, Cost: 30}}
	if err := st.Refund(ctx, ret, now); err != nil {
		t.Fatal(err)
	}
	if d := decide1(t, st, "rl:fw", l, 0, "", now+3); d.Remaining != 70 {
		t.Fatalf("after returning 30: remaining %d, want 70", d.Remaining)
	}
	// A fraction of what is left that rounds to nothing grants nothing.
	decide1(t, st, "rl:fw", l, 69, "", now+4)
	if _, got, left, _, _ = st.Allot(ctx, ck, 500, now+5); got != 0 || left != 1 {
		t.Fatalf("slice of 1 left at 50%%: %d (left %d), want 0 (left 1)", got, left)
	}
	// The next window starts from its own count.
	if _, got, _, _, _ = st.Allot(ctx, ck, 1000, base+1000); got != 80 {
		t.Fatalf("next window's slice %d, want 80", got)
	}
}

// TestAllotCalendarWindow: a calendar window's slice is charged to its
// period.
func TestAllotCalendarWindow(t *testing.T) {
	st, _ := newStore(t)
	cal, err := algo.NewCalendar(algo.Day, "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	l := algo.Limit{Kind: algo.FixedWindow, Count: 10, Period: cal.Longest(), Calendar: cal}
	now := base
	if _, got, left, reset, err := st.Allot(context.Background(), store.Check{Key: "rl:cal", Limit: l, Cost: 4}, 1000, now); err != nil || got != 4 || left != 6 || reset != cal.SpanAt(now).End-now {
		t.Fatalf("Allot = %d, %d, %d, %v; want 4, 6, %d", got, left, reset, err, cal.SpanAt(now).End-now)
	}
	if d := decide1(t, st, "rl:cal", l, 0, "", now+1); d.Remaining != 6 {
		t.Fatalf("remaining %d, want 6", d.Remaining)
	}
}

// TestAllotTokenBucket: a slice takes whole tokens at once; the refill
// continues; a refund gives the unused tokens back.
func TestAllotTokenBucket(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	l := algo.Limit{Kind: algo.TokenBucket, Count: 10, Period: 1000, Burst: 20}
	ck := store.Check{Key: "rl:tb", Limit: l, Cost: 100}
	now := base
	if _, got, left, reset, err := st.Allot(ctx, ck, 750, now); err != nil || got != 15 || left != 5 || reset != 1500 {
		t.Fatalf("Allot = %d, %d, %d, %v; want 15, 5, 1500", got, left, reset, err)
	}
	if d := decide1(t, st, "rl:tb", l, 0, "", now+100); d.Remaining != 6 {
		t.Fatalf("100 ms later: remaining %d, want 6 (5 + one refilled)", d.Remaining)
	}
	if err := st.Refund(ctx, []store.Check{{Key: "rl:tb", Limit: l, Cost: 9}}, now); err != nil {
		t.Fatal(err)
	}
	if d := decide1(t, st, "rl:tb", l, 0, "", now+100); d.Remaining != 15 {
		t.Fatalf("after returning 9: remaining %d, want 15", d.Remaining)
	}
}

// TestAllotRefused: algorithms that do not slice are refused by the
// script, and the fraction is checked.
func TestAllotRefused(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	l := algo.Limit{Kind: algo.SlidingLog, Count: 10, Period: 1000}
	if _, _, _, _, err := st.Allot(ctx, store.Check{Key: "rl:sl", Limit: l, Cost: 5}, 500, base); err == nil {
		t.Fatal("sliding log slice: no error")
	}
	l = algo.Limit{Kind: algo.FixedWindow, Count: 10, Period: 1000}
	if _, _, _, _, err := st.Allot(ctx, store.Check{Key: "rl:fw", Limit: l, Cost: 5}, 0, base); err == nil {
		t.Fatal("fraction 0: no error")
	}
}
