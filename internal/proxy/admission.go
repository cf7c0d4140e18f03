package proxy

import (
	"context"
	"net/netip"
	"time"

	"rlproxy/internal/metrics"
	"rlproxy/internal/policy"
	"rlproxy/internal/reqview"
)

// admission is one request's standing with its route's policies, from the
// decision to the end of its response, in the spirit of
// golang.org/x/time/rate's Reservation: decide charges the policies, wait
// serves the leaky-bucket turn they granted (refunding the charge when a
// shaping cap refuses it), refund cancels the charge, and finish — the one
// call deferred on the request path — settles the charge with the
// response's status and cost (count_status, cost_response_header), stops
// the lease renewal and releases the concurrency leases. It knows no HTTP
// engine: an engine gives it a context, the request view and, at the end,
// a response (response below). It lives in the pooled record, so it costs
// no allocation.
type admission struct {
	s     *Server
	rt    *Runtime
	route *policy.Route
	res   *policy.Result // nil: nothing decided (a route without policies, or not yet)
	stop  func()         // ends the lease renewal; nil: none runs
	state admissionState
	// released: the leases are released (release runs once)
	released bool

	// What the access log shows of the request's fate: decision
	// (decisionAllowed, ...), with policy (rejected by) and waitMS
	// (delayed). Set before the admission too (no-route, bad-request, ...).
	decision string
	policy   string
	waitMS   int64
}

// admissionState is where an admission stands; finish acts on it.
type admissionState uint8

const (
	admNone     admissionState = iota // nothing held: not decided, refused or undecidable
	admHeld                           // allowed: charges (and leases) held, response not over
	admLeft                           // the client left during its wait: charged, settles as 499
	admRefunded                       // refused after the decision (a shaping cap, a body over max_body_size): charged by none
	admAnswered                       // the response ended normally: settles with its status and cost
	admFinished                       // finish ran
)

// response is what an engine's recorder knows of a request's response
// once it is over, for finish.
type response interface {
	// finalStatus is the final status sent: 101 for a switch, 499 when
	// the client left before any.
	finalStatus() int
	// cost reads the whole-number cost header name from the response's
	// header or trailer.
	cost(name string) (int64, bool)
	// bodyTooLarge reports whether the request's body grew past
	// max_body_size while it was forwarded.
	bodyTooLarge() bool
}

// begin starts a's life on route under rt.
func (a *admission) begin(s *Server, rt *Runtime, route *policy.Route) {
	a.s, a.rt, a.route = s, rt, route
}

// decide asks the route's policies about the request of view v from client
// ip, counting the decision (metrics, the admin page's live view, the
// refusal log). It reports whether the request may go on; a refusal or an
// outage is the caller's to answer (answerDecision). A route without
// policies is let through undecided.
func (a *admission) decide(ctx context.Context, v *reqview.View, ip netip.Addr) bool {
	s := a.s
	if !a.route.Limited() {
		a.decision = decisionUnlimited
		s.live.Observe(a.route, nil)
		return true
	}
	a.res = s.results.Get().(*policy.Result)
	start := time.Now()
	_ = a.rt.Limiter.Decide(ctx, a.route, v, ip, a.res)
	if s.metrics != nil {
		s.metrics.ObserveDecision(time.Since(start))
	}
	s.live.Observe(a.route, a.res)
	switch a.res.Outcome {
	case policy.Unavailable:
		a.decision = decisionUnavailable
		return false
	case policy.Refuse:
		a.decision = decisionRejected
		if a.res.Binding >= 0 {
			a.policy = a.res.Items[a.res.Binding].Policy.Name
		}
		s.logRefusal(a.rt, a.route, a.res)
		return false
	}
	a.decision, a.state = decisionAllowed, admHeld
	if a.res.HasLeases() {
		// Leases are held from the decision on: renewed through a wait
		// too, and released whatever the request's fate (finish).
		a.stop = s.renewLeases(a.rt.Limiter, a.res)
	}
	return true
}

// waitEnd is how a wait ended.
type waitEnd uint8

const (
	waited waitEnd = iota // the turn came (or none was needed): forward
	capped                // refused by a shaping cap, refunded: answerCapped
	gone                  // the client left while waiting: not forwarded, stays charged
)

// wait holds the request for its leaky-bucket turn (nginx limit_req
// without nodelay) within the shaping caps: a wait beyond server.max_wait,
// or one more than server.max_waiting requests already waiting, is
// refused, and since a refused request is charged by none, its charge is
// refunded first (policy.Limiter.Refund), before the client can retry on
// the answer, so refused requests leave no water in the bucket to delay
// the next ones. A client that goes away while waiting is never forwarded
// and stays charged, as with nginx.
func (a *admission) wait(ctx context.Context) waitEnd {
	if a.res == nil || a.res.Wait <= 0 {
		return waited
	}
	s, srv := a.s, &a.rt.Config.Server
	a.decision, a.waitMS = decisionDelayed, a.res.Wait
	d := time.Duration(a.res.Wait) * time.Millisecond
	if n := s.waiting.Add(1); d > srv.MaxWait || n > int64(srv.MaxWaiting) {
		s.waiting.Add(-1)
		a.refund()
		a.decision = decisionRejected
		if s.metrics != nil {
			which := metrics.CapMaxWaiting
			if d > srv.MaxWait {
				which = metrics.CapMaxWait
			}
			s.metrics.ShapingRefusal(a.route.Name, which)
		}
		return capped
	}
	defer s.waiting.Add(-1)
	if !Hold(ctx, d, s.metrics) {
		a.state = admLeft
		return gone
	}
	return waited
}

// refund cancels a's charge — the request is refused after its decision
// (a shaping cap, a body over max_body_size) and charged by none; its
// concurrency leases go with it.
func (a *admission) refund() {
	a.rt.Limiter.Refund(a.res)
	a.state = admRefunded
}

// answered notes that the response ended normally: finish settles it. A
// response cut by a panic (ReverseProxy's http.ErrAbortHandler) never
// gets here and is not settled: its charge stands as decided.
func (a *admission) answered() {
	if a.state == admHeld {
		a.state = admAnswered
	}
}

// finish ends a: a response that ended normally is settled with its
// status and cost (only on a route that settles), or refunded when its
// request's body turned out too large; a client that left during its wait
// settles as 499; then the lease renewal stops, the leases are released
// and the decision's record goes back to the pool. It runs once, whatever
// path the request took, a panic included; later calls do nothing.
func (a *admission) finish(resp response) {
	res := a.res
	if res == nil || a.state == admFinished {
		a.state = admFinished
		return
	}
	l := a.rt.Limiter
	switch a.state {
	case admAnswered:
		if resp.bodyTooLarge() {
			a.refund()
		} else if a.route.Settles() {
			a.settle(resp)
		}
	case admLeft:
		if a.route.Settles() {
			l.Settle(res, policy.Settlement{Status: statusClientClosed})
		}
	}
	a.release()
	a.state, a.res = admFinished, nil
	a.s.results.Put(res)
}

// release stops the lease renewal and ends the concurrency leases, once:
// at finish, or at once where nothing tells when the request ends
// (Judge).
func (a *admission) release() {
	if a.stop != nil {
		a.stop()
		a.stop = nil
	}
	if !a.released && a.res.HasLeases() {
		a.released = true
		a.rt.Limiter.Release(a.res)
	}
}

// settle settles a's charge with resp's status and, for a route with a
// cost_response_header, the whole-number cost it reported; an upstream's
// answer without a usable cost is counted (rlproxy_cost_header_invalid).
func (a *admission) settle(resp response) {
	st := policy.Settlement{Status: resp.finalStatus()}
	if name := a.route.CostResponseHeader; name != "" {
		st.Cost, st.HasCost = resp.cost(name)
		if !st.HasCost && a.s.metrics != nil && upstreamAnswered(st.Status) {
			a.s.metrics.CostHeaderInvalid(a.route.Name)
		}
	}
	a.rt.Limiter.Settle(a.res, st)
}

// Hold waits d, a leaky-bucket turn the policies granted, counted in m's
// delay histogram and waiting gauge (m may be nil). It returns true when
// the wait is over, false when ctx ended first (the caller went away: the
// request is not forwarded, and stays charged, as with nginx).
func Hold(ctx context.Context, d time.Duration, m *metrics.Metrics) bool {
	if m != nil {
		m.ObserveDelay(d)
		m.AddWaiting(1)
		defer m.AddWaiting(-1)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// renewLeases refreshes res's concurrency leases while the request runs.
func (s *Server) renewLeases(l *policy.Limiter, res *policy.Result) (stop func()) {
	every := res.LeaseRenewEvery()
	if every <= 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				l.Renew(ctx, res)
			}
		}
	}()
	return func() { cancel(); <-done }
}
