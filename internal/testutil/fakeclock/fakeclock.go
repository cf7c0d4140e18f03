// Package fakeclock is a settable clock for tests that inject time (for
// example server.Options.Now), so that a test waits for a bucket to refill
// or a window to end by advancing the clock instead of sleeping.
package fakeclock

import (
	"sync"
	"time"
)

// Clock is a time that moves only when told to. It is safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock reading t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
