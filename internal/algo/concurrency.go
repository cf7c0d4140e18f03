package algo

import (
	"fmt"
	"slices"
	"time"
)

// concurrency counts requests in flight: Count leases at most (State.Leases),
// each expiring Period ms after it was acquired or last refreshed.
var concurrency = Algorithm{
	Kind: Concurrency, Name: "concurrency", Label: "concurrency", Code: "cc", Listed: 6,
	Fields: []string{"limit", "lease"}, Required: []string{"limit"},
	MaxCount: MaxCount, Var: true, Leases: true,
	NoSlice: "it counts requests in flight, which end at their own time: leases cannot be taken in advance",
	params:  concurrencyParams,
}

// concurrencyOp performs operation o of the concurrency limit (Limit.run).
// Concurrency has no unconditional charge: it counts requests in flight,
// not cost.
func concurrencyOp(o op, l *Limit, d *Decision, s *State, now, cost int64, lease string) int64 {
	switch o {
	case opDecide:
		concurrencyDecide(l, d, s, now, cost, lease)
	case opRefund:
		concurrencyRefund(l, s, now, cost, lease)
	case opIdle:
		return concurrencyIdle(l, s, now)
	}
	return 0
}

// concurrencyDecide acquires or refreshes the lease id when cost > 0 and
// id is set; otherwise it peeks.
func concurrencyDecide(l *Limit, d *Decision, s *State, now, c int64, id string) {
	if id == "" {
		c = 0
	}
	live := 0
	held := false
	for _, ls := range s.Leases {
		if ls.Expiry > now {
			live++
			held = held || ls.ID == id && id != ""
		}
	}
	accept := held || int64(live) < l.Count
	if accept && c > 0 {
		// Copy on write: the caller's slice stays as it was.
		next := make([]Lease, 0, live+1)
		for _, ls := range s.Leases {
			if ls.Expiry > now && ls.ID != id {
				next = append(next, ls)
			}
		}
		s.Leases = append(next, Lease{ID: id, Expiry: now + l.Period})
		if !held {
			live++
		}
	}
	*d = Decision{Allowed: accept, Remaining: max(l.Count-int64(live), 0)}
	earliest, latest := int64(0), int64(0)
	for _, ls := range s.Leases {
		if ls.Expiry > now {
			if earliest == 0 || ls.Expiry < earliest {
				earliest = ls.Expiry
			}
			latest = max(latest, ls.Expiry)
		}
	}
	if latest > 0 {
		d.ResetAfter = latest - now
	}
	if !accept {
		d.RetryAfter = max(earliest-now, 1)
	}
}

// concurrencyRefund drops the request's lease; nothing without one.
func concurrencyRefund(_ *Limit, s *State, now, _ int64, lease string) {
	if lease != "" {
		s.Release(lease, now)
	}
}

// concurrencyIdle is when the latest lease expires.
func concurrencyIdle(_ *Limit, s *State, _ int64) int64 {
	end := int64(0)
	for _, ls := range s.Leases {
		end = max(end, ls.Expiry)
	}
	return end
}

// concurrencyParams is "10 (lease 30s)".
func concurrencyParams(l *Limit) string {
	return fmt.Sprintf("%d (lease %v)", l.Count, FormatDuration(time.Duration(l.Period)*time.Millisecond))
}

// Release ends the lease id of a Concurrency state (expired leases go too).
// Like Decide it replaces s.Leases rather than changing its elements. It
// reports whether the lease was held.
func (s *State) Release(id string, now int64) bool {
	i := slices.IndexFunc(s.Leases, func(ls Lease) bool { return ls.ID == id })
	if i < 0 {
		return false
	}
	next := make([]Lease, 0, len(s.Leases)-1)
	for _, ls := range s.Leases {
		if ls.ID != id && ls.Expiry > now {
			next = append(next, ls)
		}
	}
	if len(next) == 0 {
		next = nil
	}
	s.Leases = next
	return true
}
