package guard

import (
	"context"
	"sync"
	"sync/atomic"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// refStore is a small in-test store.Store with the DESIGN.md arithmetic of
// the fixed window, the token bucket and concurrency leases, and the
// store.Store contract (all-or-nothing, refused decisions report peeks). It
// stands in for store/memory, which is built in parallel, to test the
// decorators' local semantics; it makes no distributed claim.
type refStore struct {
	mu    sync.Mutex
	state map[string]*refState
	// clock is the store's time when Decide gets now = 0.
	clock func() int64
}

type refState struct {
	w, n   int64            // fixed window: window index, count
	t, l   int64            // token bucket: tokens (units), last ms
	seen   bool             // token bucket: t, l are set (else idle, full)
	leases map[string]int64 // concurrency: lease → expiry ms
}

func newRefStore(clock func() int64) *refStore {
	return &refStore{state: make(map[string]*refState), clock: clock}
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// decide computes one check at now with the given cost and, when commit,
// writes the charge.
func (s *refStore) decide(ch *store.Check, now, cost int64, commit bool) algo.Decision {
	st := s.state[ch.Key]
	if st == nil {
		st = &refState{leases: make(map[string]int64)}
		if commit {
			s.state[ch.Key] = st
		}
	}
	lim := ch.Limit
	P, R, B := lim.Period, lim.Count, lim.Burst
	switch lim.Kind {
	case algo.FixedWindow:
		cw := now / P
		n := st.n
		if st.w != cw {
			n = 0
		}
		reset := (cw+1)*P - now
		if n+cost > lim.Count {
			return algo.Decision{Remaining: max(lim.Count-n, 0), RetryAfter: reset, ResetAfter: reset}
		}
		if commit {
			st.w, st.n = cw, n+cost
		}
		return algo.Decision{Allowed: true, Remaining: lim.Count - n - cost, ResetAfter: reset}
	case algo.TokenBucket:
		T := B * P
		if st.seen {
			el := max(now-st.l, 0)
			T = min(st.t+min(el, ceilDiv(B*P-st.t, R))*R, B*P)
		}
		if T < cost*P {
			return algo.Decision{Remaining: T / P, RetryAfter: ceilDiv(cost*P-T, R), ResetAfter: ceilDiv(B*P-T, R)}
		}
		level := T - cost*P
		if commit {
			st.t, st.l, st.seen = level, max(st.l, now), true
		}
		return algo.Decision{Allowed: true, Remaining: level / P, ResetAfter: ceilDiv(B*P-level, R)}
	case algo.Concurrency:
		for id, exp := range st.leases {
			if exp <= now && commit {
				delete(st.leases, id)
			}
		}
		held := int64(0)
		for _, exp := range st.leases {
			if exp > now {
				held++
			}
		}
		_, holds := st.leases[ch.Lease]
		if cost > 0 && !holds && held >= lim.Count {
			first := int64(1 << 62)
			for _, exp := range st.leases {
				first = min(first, exp)
			}
			return algo.Decision{RetryAfter: max(first-now, 1), ResetAfter: first - now}
		}
		if cost > 0 && commit {
			st.leases[ch.Lease] = now + P
			if !holds {
				held++
			}
		}
		last := int64(0)
		for _, exp := range st.leases {
			last = max(last, exp-now)
		}
		return algo.Decision{Allowed: true, Remaining: lim.Count - held, ResetAfter: last}
	}
	panic("refStore: unsupported kind")
}

func (s *refStore) Decide(ctx context.Context, checks []store.Check, now int64, out []algo.Decision) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now == 0 {
		now = s.clock()
	}
	ok := true
	for i := range checks {
		out[i] = s.decide(&checks[i], now, checks[i].Cost, false)
		ok = ok && out[i].Allowed
	}
	for i := range checks {
		switch {
		case ok:
			out[i] = s.decide(&checks[i], now, checks[i].Cost, true)
		case out[i].Allowed:
			out[i] = s.decide(&checks[i], now, 0, false)
		}
	}
	return now, nil
}

func (s *refStore) Release(ctx context.Context, checks []store.Check) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range checks {
		if st := s.state[ch.Key]; st != nil && ch.Limit.Kind == algo.Concurrency {
			delete(st.leases, ch.Lease)
		}
	}
	return nil
}

func (s *refStore) Close() error { return nil }

// countingStore counts the decisions that reach the store it wraps.
type countingStore struct {
	store.Store
	calls atomic.Int64
}

func counting(s store.Store) *countingStore { return &countingStore{Store: s} }

func (s *countingStore) Decide(ctx context.Context, checks []store.Check, now int64, out []algo.Decision) (int64, error) {
	s.calls.Add(1)
	return s.Store.Decide(ctx, checks, now, out)
}

func (s *countingStore) callCount() int { return int(s.calls.Load()) }
