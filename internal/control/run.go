package control

import (
	"context"
	"time"
)

// Intervals of Run.
const (
	// PollEvery is how often an instance asks Valkey for the entries'
	// version besides the published changes: a change whose message was
	// lost applies here within it (plus a round trip).
	PollEvery = 20 * time.Millisecond
	// SweepEvery is how often expired entries are removed (an expired
	// entry stops applying at its expiry whatever this says: Find checks).
	SweepEvery = time.Second
)

// Run keeps c current until ctx ends: with Valkey it applies other
// instances' changes as they are published, and polls for them every
// PollEvery; it removes expired entries every SweepEvery.
func (c *Controller) Run(ctx context.Context) {
	kick := make(chan struct{}, 1)
	if v := c.opts.Valkey; v != nil {
		go v.subscribe(ctx, func() {
			select {
			case kick <- struct{}{}:
			default: // a Sync is due already
			}
		})
	}
	poll := time.NewTicker(PollEvery)
	defer poll.Stop()
	sweep := time.NewTicker(SweepEvery)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
			c.Sync(ctx)
		case <-poll.C:
			if c.opts.Valkey != nil {
				c.Sync(ctx)
			}
		case <-sweep.C:
			c.mu.Lock()
			swept := c.sweep(ctx)
			c.mu.Unlock()
			if swept {
				c.changed()
			}
		}
	}
}

// Sync applies the changes other instances made in Valkey since the last
// Sync (a no-op without Valkey). Run calls it every PollEvery and on every
// published change; a failed poll is logged and retried at the next.
func (c *Controller) Sync(ctx context.Context) {
	if c.sync(ctx) {
		c.changed()
	}
}

// sync is Sync without OnChange; it reports whether anything changed.
func (c *Controller) sync(ctx context.Context) bool {
	v := c.opts.Valkey
	if v == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	chs, full, ver, err := v.since(ctx)
	if err != nil {
		if !c.failing { // once per outage, not every poll
			c.opts.Log.Warn("control: reading entry changes from valkey failed; retrying every poll", "err", err)
		}
		c.failing = true
		return false
	}
	if c.failing {
		c.opts.Log.Info("control: reading entry changes from valkey again")
		c.failing = false
	}
	if full != nil {
		clear(c.recs)
		for _, r := range full {
			c.recs[r.ID] = r
		}
		c.rebuild()
	}
	for _, ch := range chs {
		switch {
		case ch.rec == nil:
			c.unapply(ch.id)
		case c.recs[ch.id] == nil: // an entry never changes: one held already (this instance's own) stays
			c.apply(ch.rec)
		}
	}
	v.version = ver
	return full != nil || len(chs) > 0
}
