package policy

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"rlproxy/internal/config"
	"rlproxy/internal/control"
	"rlproxy/internal/metrics"
	"rlproxy/internal/store/memory"
	"rlproxy/internal/testutil/fakeclock"
)

// controlled is a Limiter over a memory store and a Controller, both on
// one injected clock.
type controlled struct {
	l   *Limiter
	ctl *control.Controller
	clk *fakeclock.Clock
}

func newControlled(t *testing.T, yml string, m ...*metrics.Metrics) *controlled {
	t.Helper()
	cfg, err := config.ParseWith("control.yaml", []byte(yml), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clk := fakeclock.New(time.Unix(1_700_000_000, 0))
	st := memory.New(memory.Options{MaxKeys: 1000, SweepInterval: -1, Clock: func() int64 { return clk.Now().UnixMilli() }})
	t.Cleanup(func() { _ = st.Close() })
	ctl, err := control.New(control.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctl.Configure(cfg)
	opts := Options{Store: st, Now: clk.Now, Control: ctl, LeasePrefix: "t-"}
	if len(m) > 0 {
		opts.Metrics = m[0]
	}
	l, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &controlled{l: l, ctl: ctl, clk: clk}
}

// seq decides n requests from ip with header pairs and spells the
// outcomes: "." passed, "x" refused by a limit, "B" by a ban, "P" by the
// penalty box.
func (c *controlled) seq(t *testing.T, n int, ip string, header ...string) string {
	t.Helper()
	var b strings.Builder
	for range n {
		r := httptest.NewRequest("GET", "/", nil)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		var res Result
		if err := c.l.Decide(context.Background(), c.l.Routes()[0], view(r), netip.MustParseAddr(ip), &res); err != nil {
			t.Fatal(err)
		}
		switch {
		case res.Outcome == Pass:
			b.WriteByte('.')
		case res.Items[res.Binding].Refused == RefusedBan:
			b.WriteByte('B')
		case res.Items[res.Binding].Refused == RefusedPenalty:
			b.WriteByte('P')
		default:
			b.WriteByte('x')
		}
	}
	return b.String()
}

func (c *controlled) set(t *testing.T, r control.Request) control.Entry {
	t.Helper()
	e, err := c.ctl.Set(context.Background(), r, "test")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func ptr(v int64) *int64 { return &v }

const precedenceYAML = `
upstreams: { app: { url: "http://127.0.0.1:1" } }
policies:
  api: { algorithm: fixed_window, limit: 2, window: 1m, key: [header:X-API-Key, ip], exempt: [192.0.2.0/24] }
routes: [ { name: all, upstream: app, policies: [api] } ]
`

// TestControlPrecedence shows ban > API exempt > config exempt >
// override > the configured limit, case by case, with exact sequences.
func TestControlPrecedence(t *testing.T) {
	c := newControlled(t, precedenceYAML)
	minute := func() { c.clk.Advance(time.Minute) }
	if got := c.seq(t, 3, "198.51.100.1", "X-API-Key", "k1"); got != "..x" {
		t.Fatalf("configured limit: %s, want ..x", got)
	}
	minute()
	c.set(t, control.Request{Policy: "api", Key: "k1", Action: control.ActionOverride, Limit: ptr(4)})
	if got := c.seq(t, 5, "198.51.100.1", "X-API-Key", "k1"); got != "....x" {
		t.Fatalf("override limit 4: %s", got)
	}
	minute()
	if got := c.seq(t, 3, "192.0.2.9", "X-API-Key", "k1"); got != "..." {
		t.Fatalf("config exempt over override: %s", got)
	}
	ex := c.set(t, control.Request{Policy: "api", Source: "ip", Key: "198.51.100.1", Action: control.ActionExempt})
	if got := c.seq(t, 6, "198.51.100.1", "X-API-Key", "k1"); got != "......" {
		t.Fatalf("API exempt over override: %s", got)
	}
	// An address ban holds against the client with its API key, over both exemptions.
	ban := c.set(t, control.Request{Policy: "api", Source: "cidr", Key: "192.0.2.0/24", Action: control.ActionBan, ExpiresIn: "90s"})
	if got := c.seq(t, 2, "192.0.2.9", "X-API-Key", "k1"); got != "BB" {
		t.Fatalf("ban over config exempt: %s", got)
	}
	c.set(t, control.Request{Policy: "api", Source: "ip", Key: "198.51.100.1", Action: control.ActionBan})
	if got := c.seq(t, 2, "198.51.100.1", "X-API-Key", "k1"); got != "BB" {
		t.Fatalf("ban over API exempt: %s", got)
	}
	var res Result
	r := httptest.NewRequest("GET", "/", nil)
	_ = c.l.Decide(context.Background(), c.l.Routes()[0], view(r), netip.MustParseAddr("192.0.2.9"), &res)
	if res.RetryAfter != 90_000 || res.Items[0].Status != Rejected {
		t.Fatalf("ban Retry-After %d ms, want the 90 s it has left", res.RetryAfter)
	}
	c.clk.Advance(90 * time.Second) // the ban expires: config exempt again
	if got := c.seq(t, 3, "192.0.2.9"); got != "..." {
		t.Fatalf("after the ban expired: %s", got)
	}
	if _, err := c.ctl.Delete(context.Background(), ex.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ctl.Get(context.Background(), ban.ID); err == nil {
		t.Fatal("an expired entry is still listed")
	}
}

// TestControlOverrideHeaders: the item's policy carries the limit in
// force (the quota headers read Quota and Window from it).
func TestControlOverrideHeaders(t *testing.T) {
	c := newControlled(t, precedenceYAML)
	c.set(t, control.Request{Policy: "api", Key: "k2", Action: control.ActionOverride, Limit: ptr(50), Window: "10s"})
	var res Result
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-API-Key", "k2")
	if err := c.l.Decide(context.Background(), c.l.Routes()[0], view(r), netip.MustParseAddr("198.51.100.2"), &res); err != nil {
		t.Fatal(err)
	}
	if p := res.Items[0].Policy; p.Quota != 50 || p.Window != 10 || res.Items[0].Decision.Remaining != 49 {
		t.Fatalf("quota %d window %d remaining %d, want 50 10 49", p.Quota, p.Window, res.Items[0].Decision.Remaining)
	}
}

const plansYAML = `
upstreams: { app: { url: "http://127.0.0.1:1" } }
policies:
  free: { algorithm: fixed_window, limit: 1, window: 1m }
  pro: { algorithm: fixed_window, limit: 3, window: 1m }
plans:
  tiers: { key: header:X-API-Key, default: free, plans: { free: [free], pro: [pro] }, keys: { known: free } }
routes: [ { name: all, upstream: app, plan: tiers } ]
`

// TestControlPlan: an entry's plan comes before keys and default.
func TestControlPlan(t *testing.T) {
	c := newControlled(t, plansYAML)
	if got := c.seq(t, 2, "198.51.100.3", "X-API-Key", "known"); got != ".x" {
		t.Fatalf("keys' plan: %s", got)
	}
	c.set(t, control.Request{Policy: "tiers", Key: "known", Action: control.ActionOverride, Plan: "pro"})
	if got := c.seq(t, 4, "198.51.100.3", "X-API-Key", "known"); got != "...x" {
		t.Fatalf("entry's plan over keys: %s", got)
	}
	c.set(t, control.Request{Policy: "tiers", Key: "stranger", Action: control.ActionOverride, Plan: "pro"})
	if got := c.seq(t, 4, "198.51.100.3", "X-API-Key", "stranger"); got != "...x" {
		t.Fatalf("entry's plan over default: %s", got)
	}
}

const penaltyYAML = `
upstreams: { app: { url: "http://127.0.0.1:1" } }
policies:
  api: { algorithm: fixed_window, limit: 2, window: 10s, penalty: { after: 3, within: 10s, for: 1m } }
routes: [ { name: all, upstream: app, policies: [api] } ]
`

// TestPenaltyBox is a step table on an injected clock: 3 refusals within
// 10 s put the client in the box for 1 min, which does not extend itself,
// then the normal quota is back.
func TestPenaltyBox(t *testing.T) {
	c := newControlled(t, penaltyYAML)
	const ip = "198.51.100.4"
	for _, step := range []struct {
		advance time.Duration
		n       int
		want    string
	}{
		{0, 4, "..xx"},           // 2 refusals
		{5 * time.Second, 0, ""}, // still within 10 s of both
		{0, 1, "x"},              // the third refusal starts the penalty
		{0, 2, "PP"},             // in the box: not counted, not charged
		{30 * time.Second, 3, "PPP"},
		{29 * time.Second, 1, "P"}, // 59 s into the box: not extended by the refusals in it
		{time.Second, 3, "..x"},    // out: the normal quota back
		{0, 1, "x"},                // two refusals: not yet
		{10 * time.Second, 3, "..x"},
	} {
		c.clk.Advance(step.advance)
		if got := c.seq(t, step.n, ip); got != step.want {
			t.Fatalf("after %v: %q, want %q", step.advance, got, step.want)
		}
	}
	var res Result
	r := httptest.NewRequest("GET", "/", nil)
	if got := c.seq(t, 2, ip); got != "xx" { // the second and third refusals within 10 s: in the box again
		t.Fatalf("refusals: %q", got)
	}
	_ = c.l.Decide(context.Background(), c.l.Routes()[0], view(r), netip.MustParseAddr(ip), &res)
	if res.Items[0].Refused != RefusedPenalty || res.RetryAfter != 60_000 {
		t.Fatalf("refused %v, retry after %d ms, want the penalty's 60000", res.Items[0].Refused, res.RetryAfter)
	}
}

// TestPenaltyDryRun: under dry_run the penalty is counted, never enforced.
func TestPenaltyDryRun(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry(), "")
	c := newControlled(t, strings.Replace(penaltyYAML, "penalty:", "dry_run: true, penalty:", 1), m)
	if seq := c.seq(t, 8, "198.51.100.5"); seq != "........" {
		t.Fatalf("dry run: %q, want every request passed", seq)
	}
	var got dto.Metric
	if err := m.Penalties("api").Write(&got); err != nil {
		t.Fatal(err)
	}
	if n := got.GetCounter().GetValue(); n != 1 {
		t.Fatalf("rlproxy_penalties_total %v, want 1 (the box started once, and did not extend itself)", n)
	}
}

// TestControlKeyed: the entries apply to decisions keyed by an explicit
// client id (Envoy RLS), where the id is the policy's own.
func TestControlKeyed(t *testing.T) {
	c := newControlled(t, penaltyYAML)
	c.set(t, control.Request{Policy: "api", Key: "198.51.100.6", Action: control.ActionBan})
	c.set(t, control.Request{Policy: "api", Key: "198.51.100.7", Action: control.ActionExempt})
	p := c.l.Policy("api")
	for client, want := range map[string]Refusal{"ip:198.51.100.6": RefusedBan, "ip:198.51.100.7": NotRefused} {
		var res Result
		c.l.DecideKeyed(context.Background(), []Keyed{{Policy: p, Counters: c.l.Counters("all", "api"), Client: client, Cost: 1}}, &res)
		if res.Items[0].Refused != want || (want == RefusedBan) != (res.Outcome == Refuse) {
			t.Errorf("%s: refused %v, outcome %v", client, res.Items[0].Refused, res.Outcome)
		}
	}
}
