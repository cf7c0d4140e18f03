// Package fakeclock is a settable clock for tests that inject time (for
// example server.Options.Now and server.Options.Sleep), so that a test
// waits for a bucket to refill, a window to end or a shaping wait to be
// served by advancing the clock instead of sleeping.
package fakeclock

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Clock is a time that moves only when told to. It is safe for concurrent use.
type Clock struct {
	mu       sync.Mutex
	t        time.Time
	sleepers []*sleeper // pending Sleeps, in no order
}

// sleeper is one pending Sleep: done closes once the clock reaches at.
type sleeper struct {
	at   time.Time
	done chan struct{}
}

// New returns a clock reading t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d and ends every Sleep whose time
// has come.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	c.sleepers = slices.DeleteFunc(c.sleepers, func(s *sleeper) bool {
		if s.at.After(c.t) {
			return false
		}
		close(s.done)
		return true
	})
}

// Sleep waits until the clock has advanced by d (Advance), as a real
// timer waits d of real time: it returns true then, or false when ctx
// ends first. A d ≤ 0 returns true at once.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) bool {
	c.mu.Lock()
	if d <= 0 {
		c.mu.Unlock()
		return true
	}
	s := &sleeper{at: c.t.Add(d), done: make(chan struct{})}
	c.sleepers = append(c.sleepers, s)
	c.mu.Unlock()
	select {
	case <-s.done:
		return true
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		c.sleepers = slices.DeleteFunc(c.sleepers, func(o *sleeper) bool { return o == s })
		return false
	}
}

// Sleepers returns how many Sleeps are pending: a test waits for its
// requests to be held before it advances the clock.
func (c *Clock) Sleepers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sleepers)
}

// Next returns how far the clock must advance to end the earliest pending
// Sleep, and false when none is pending.
func (c *Clock) Next() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sleepers) == 0 {
		return 0, false
	}
	at := c.sleepers[0].at
	for _, s := range c.sleepers[1:] {
		if s.at.Before(at) {
			at = s.at
		}
	}
	return at.Sub(c.t), true
}
