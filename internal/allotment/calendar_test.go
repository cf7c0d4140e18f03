package allotment

import (
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/testutil/redisserver"
)

// TestCalendarWindow: slices of a calendar day (Europe/Berlin) are spent
// only within their day: across midnight the fleet admits at most the
// limit per day, and the new day starts from its own count.
func TestCalendarWindow(t *testing.T) {
	srv := redisserver.Start(t)
	cal, err := algo.NewCalendar(algo.Day, "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	lim := algo.Limit{Kind: algo.FixedWindow, Count: 50, Period: cal.Longest(), Calendar: cal}
	set := &store.Allotment{Policy: "p", MaxFraction: 500, TTL: 60_000}
	end := cal.SpanAt(base).End
	c := &clock{}
	c.ms.Store(end - 30_000)
	fl := fleet(t, srv, 2, c, true)
	perDay := map[int64]int64{}
	for i := range 400 {
		c.ms.Add(150) // 30 s before midnight to 30 s after
		now := c.now()
		if decide(t, fl[i%2], "rl:cal", lim, set, now).Allowed {
			perDay[cal.SpanAt(now).Start]++
		}
	}
	before, after := perDay[cal.SpanAt(end-1).Start], perDay[end]
	if before != 50 || after != 50 {
		t.Fatalf("admitted %d before midnight and %d after, want 50 and 50 (%v)", before, after, perDay)
	}
	if fetches(fl) == 0 {
		t.Fatal("no slices")
	}
}
