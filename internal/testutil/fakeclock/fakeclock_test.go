package fakeclock

import (
	"context"
	"testing"
	"time"

	"rlproxy/internal/testutil/waitfor"
)

// TestSleepEndsOnAdvance: a Sleep ends when Advance reaches its time, not
// before, and one whose context ends first returns false and is no longer
// pending.
func TestSleepEndsOnAdvance(t *testing.T) {
	c := New(time.Unix(1000, 0))
	done := make(chan bool, 1)
	go func() { done <- c.Sleep(context.Background(), 100*time.Millisecond) }()
	waitfor.True(t, "the Sleep pending", func() bool { return c.Sleepers() == 1 })
	if d, ok := c.Next(); !ok || d != 100*time.Millisecond {
		t.Errorf("Next = %v, %v; want 100ms, true", d, ok)
	}
	c.Advance(99 * time.Millisecond)
	if c.Sleepers() != 1 {
		t.Fatal("a Sleep of 100 ms ended after 99 ms")
	}
	c.Advance(time.Millisecond)
	if !<-done {
		t.Error("Sleep returned false at its time")
	}
	if _, ok := c.Next(); c.Sleepers() != 0 || ok {
		t.Errorf("%d Sleeps pending after the only one ended", c.Sleepers())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if c.Sleep(ctx, time.Second) || c.Sleepers() != 0 {
		t.Errorf("a Sleep whose context ended: want false and none pending, %d pending", c.Sleepers())
	}
	if !c.Sleep(context.Background(), 0) {
		t.Error("Sleep(0) returned false")
	}
}
