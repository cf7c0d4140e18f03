package proxy

import (
	"context"
	"net/netip"
	"time"

	"rlproxy/internal/adaptive"
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
	// slot is held at the upstream's adaptive gate (acquire); zero: none.
	slot adaptive.Ticket

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
	// sampled reports whether the time an adaptive slot was held is a
	// latency sample of the upstream's (acquire).
	sampled() bool
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
	s.metrics.ObserveDecision(time.Since(start))
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
		which := metrics.CapMaxWaiting
		if d > srv.MaxWait {
			which = metrics.CapMaxWait
		}
		s.metrics.ShapingRefusal(a.route.Name, which)
		return capped
	}
	defer s.waiting.Add(-1)
	if !Hold(ctx, d, s.metrics, s.sleep) {
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

// acquire waits for a slot at gate (the upstream's adaptive concurrency
// limit, package adaptive) in priority class for client, once the
// policies allowed the request and its leaky-bucket wait was served,
// within what that wait left of the shaping budget (server.max_wait,
// server.max_waiting). Admitted, a holds the slot until finish. Shed, the
// request is refused as a shaping cap refuses it: refunded, its
// concurrency leases released at once, and acquire returns the seconds
// after which a retry may find room (decision shed). A client gone while
// waiting stays charged and settles as 499.
func (a *admission) acquire(ctx context.Context, gate *adaptive.Gate, class int, client []byte) (retryAfter int64, ok bool) {
	srv := &a.rt.Config.Server
	waited := time.Duration(a.waitMS) * time.Millisecond
	budget := adaptive.Waiting{Count: &a.s.waiting, Cap: int64(srv.MaxWaiting), Max: srv.MaxWait - waited}
	t, out, ra := gate.Acquire(ctx, class, client, budget, time.Now())
	switch out {
	case adaptive.Admitted:
		a.slot = t
		return 0, true
	case adaptive.Gone:
		if a.state == admHeld {
			a.state = admLeft
		}
		return 0, false
	}
	a.decision = decisionShed
	if a.res != nil {
		a.refund()
	}
	return ra, false
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
// settles as 499; then the adaptive slot is freed (its hold time a latency
// sample unless resp says otherwise), the lease renewal stops, the leases
// are released and the decision's record goes back to the pool. It runs once, whatever
// path the request took, a panic included; later calls do nothing.
func (a *admission) finish(resp response) {
	if a.state == admFinished {
		return
	}
	res := a.res
	switch {
	case res == nil:
	case a.state == admAnswered && resp.bodyTooLarge():
		a.refund()
	case a.state == admAnswered && a.route.Settles():
		a.settle(resp)
	case a.state == admLeft && a.route.Settles():
		a.rt.Limiter.Settle(res, policy.Settlement{Status: statusClientClosed})
	}
	if a.slot.Held() {
		a.slot.Done(resp.sampled(), time.Now())
		a.slot = adaptive.Ticket{}
	}
	a.state = admFinished
	if res != nil {
		a.release()
		a.res = nil
		a.s.results.Put(res)
	}
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
		if !st.HasCost && upstreamAnswered(st.Status) {
			a.s.metrics.CostHeaderInvalid(a.route.Name)
		}
	}
	a.rt.Limiter.Settle(a.res, st)
}

// Sleep waits d on a clock: it returns true once d has passed, false when
// ctx ended first. A test injects one that follows its fake clock
// (server.Options.Sleep), so that a wait is served on the same time the
// decisions are made at.
type Sleep func(ctx context.Context, d time.Duration) bool

// Hold waits d, a leaky-bucket turn the policies granted, counted in m's
// delay histogram and waiting gauge, on sleep (nil: a real timer). It
// returns true when the wait is over, false when ctx ended first (the
// caller went away: the request is not forwarded, and stays charged, as
// with nginx).
func Hold(ctx context.Context, d time.Duration, m *metrics.Metrics, sleep Sleep) bool {
	m.ObserveDelay(d)
	m.AddWaiting(1)
	defer m.AddWaiting(-1)
	if sleep != nil {
		return sleep(ctx, d)
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
