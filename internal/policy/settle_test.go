package policy

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"testing"

	"rlproxy/internal/config"
	"rlproxy/internal/store/memory"
)

// TestSettleCountStatus: count_status [401], 3 per minute. Each admitted
// request reserves one unit; Settle refunds it unless the status was 401.
// Five successes then three failures pass; the next request is refused at
// Decide (before any upstream), whatever its response would have been. A
// policy without count_status on the same route keeps every charge.
func TestSettleCountStatus(t *testing.T) {
	cfg, err := config.ParseWith("settle.yaml", []byte(`
upstreams: { app: { url: "http://127.0.0.1:1" } }
policies:
  fails: { algorithm: fixed_window, limit: 3, window: 1m, key: ip, count_status: [401] }
  all: { algorithm: fixed_window, limit: 100, window: 1m, key: ip }
routes: [ { name: login, upstream: app, policies: [fails, all] } ]
`), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Injected time that never moves, 10 s into a minute window.
	var now int64 = 1_700_000_050_000
	st := memory.New(memory.Options{MaxKeys: 100, SweepInterval: -1, Clock: func() int64 { return now }})
	defer st.Close()
	l, err := New(cfg, Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	rt := l.Routes()[0]
	if !rt.Settles() {
		t.Fatal("a route with a count_status policy does not settle")
	}
	r := view(httptest.NewRequest("POST", "/login", nil))
	ip := netip.MustParseAddr("192.0.2.5")
	ctx := context.Background()
	var res Result
	for i, status := range []int{200, 200, 200, 200, 200, 401, 401, 401} {
		if err := l.Decide(ctx, rt, r, ip, &res); err != nil || res.Outcome != Pass {
			t.Fatalf("request %d (%d): %v outcome %v, want pass", i+1, status, err, res.Outcome)
		}
		l.Settle(&res, Settlement{Status: status})
		l.Settle(&res, Settlement{Status: 200}) // once only
		l.Release(&res)
	}
	if err := l.Decide(ctx, rt, r, ip, &res); err != nil || res.Outcome != Refuse || res.Items[0].Status != Rejected {
		t.Fatalf("9th: %v outcome %v status %v, want refused by fails", err, res.Outcome, res.Items[0].Status)
	}
	l.Settle(&res, Settlement{Status: 200}) // a refusal charged nothing to refund
	var peek Result
	if err := l.Peek(ctx, rt, r, ip, &peek); err != nil {
		t.Fatal(err)
	}
	if f, a := peek.Items[0].Decision.Remaining, peek.Items[1].Decision.Remaining; f != 0 || a != 92 {
		t.Errorf("after 8 requests: fails remaining %d, all remaining %d; want 0 (3 counted failures) and 92", f, a)
	}
	// Another client that only succeeds is never refused.
	other := netip.MustParseAddr("192.0.2.6")
	for i := range 10 {
		if err := l.Decide(ctx, rt, r, other, &res); err != nil || res.Outcome != Pass {
			t.Fatalf("succeeding client, request %d: outcome %v", i+1, res.Outcome)
		}
		l.Settle(&res, Settlement{Status: 200})
	}
}

// TestSettleResponseCost: a route charged by its response's cost. A token
// bucket of 100 at 1 r/s (and a dry-run window beside it, settled too):
// three requests whose responses used 40 tokens pass, the third leaving a
// debt of 20; the 4th is refused with RetryAfter 21 s (until a request of
// cost 1 fits). A response cheaper than the up-front cost gives the rest
// back; a missing value keeps the up-front cost.
func TestSettleResponseCost(t *testing.T) {
	cfg, err := config.ParseWith("cost.yaml", []byte(`
upstreams: { app: { url: "http://127.0.0.1:1" } }
policies:
  tokens: { algorithm: token_bucket, rate: 1r/s, burst: 100, key: ip }
  daily: { algorithm: fixed_window, limit: 1000, window: 24h, key: ip, dry_run: true }
routes:
  - { name: llm, upstream: app, policies: [tokens, daily], cost: 2, cost_response_header: x-tokens-used }
`), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var now int64 = 1_700_000_050_000 // never moves
	st := memory.New(memory.Options{MaxKeys: 100, SweepInterval: -1, Clock: func() int64 { return now }})
	defer st.Close()
	l, err := New(cfg, Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	rt := l.Routes()[0]
	if !rt.Settles() || rt.CostResponseHeader != "X-Tokens-Used" {
		t.Fatalf("route settles %v, header %q", rt.Settles(), rt.CostResponseHeader)
	}
	r := view(httptest.NewRequest("POST", "/v1/chat", nil))
	ctx := context.Background()
	ip := netip.MustParseAddr("192.0.2.7")
	var res Result
	for i := range 3 {
		if err := l.Decide(ctx, rt, r, ip, &res); err != nil || res.Outcome != Pass {
			t.Fatalf("request %d: %v outcome %v", i+1, err, res.Outcome)
		}
		l.Settle(&res, Settlement{Status: 200, Cost: 40, HasCost: true})
	}
	if err := l.Decide(ctx, rt, r, ip, &res); err != nil || res.Outcome != Refuse || res.RetryAfter != 22_000 {
		t.Fatalf("4th: %v outcome %v retry %d ms; want refused for 22 s (a debt of 20, and the route's cost of 2)", err, res.Outcome, res.RetryAfter)
	}
	var peek Result
	if err := l.Peek(ctx, rt, r, ip, &peek); err != nil || peek.Items[1].Decision.Remaining != 1000-120 {
		t.Fatalf("dry-run window after 3×40: remaining %d, %v; want 880", peek.Items[1].Decision.Remaining, err)
	}

	// Another client: a cheaper response refunds, a missing value keeps 2.
	other := netip.MustParseAddr("192.0.2.8")
	if err := l.Decide(ctx, rt, r, other, &res); err != nil || res.Outcome != Pass {
		t.Fatal(err, res.Outcome)
	}
	l.Settle(&res, Settlement{Status: 200, Cost: 0, HasCost: true})
	if err := l.Decide(ctx, rt, r, other, &res); err != nil || res.Outcome != Pass {
		t.Fatal(err, res.Outcome)
	}
	l.Settle(&res, Settlement{Status: 200})
	if err := l.Peek(ctx, rt, r, other, &peek); err != nil || peek.Items[0].Decision.Remaining != 98 || peek.Items[1].Decision.Remaining != 998 {
		t.Fatalf("after a free response and one without a cost: remaining %d and %d, %v; want 98 and 998",
			peek.Items[0].Decision.Remaining, peek.Items[1].Decision.Remaining, err)
	}
}
