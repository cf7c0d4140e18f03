package control

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"rlproxy/internal/config"
)

const testYAML = `
upstreams: { app: { url: "http://127.0.0.1:1" } }
policies:
  api: { algorithm: token_bucket, rate: 10r/s, burst: 5, key: [header:X-API-Key, ip] }
  win: { algorithm: fixed_window, limit: 3, window: 1m }
  combo: { algorithm: fixed_window, limit: 3, window: 1m, combine: true, key: [header:A, header:B] }
plans:
  tiers: { key: header:X-API-Key, default: free, plans: { free: [win], pro: [api] }, keys: {} }
routes: [ { name: all, upstream: app, policies: [api] } ]
`

func testConfig(t testing.TB, yml string) *config.Config {
	t.Helper()
	cfg, err := config.ParseWith("test.yaml", []byte(yml), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// clock is an injected clock, advanced by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTest(t *testing.T, opts Options) (*Controller, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	opts.Now = clk.now
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	c.Configure(testConfig(t, testYAML))
	return c, clk
}

func i64(v int64) *int64 { return &v }

func TestSetValidation(t *testing.T) {
	c, _ := newTest(t, Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		r    Request
		kind Kind
	}{
		{"no policy", Request{Policy: "nope", Key: "1.2.3.4", Action: ActionBan}, KindInvalid},
		{"no key", Request{Policy: "api", Action: ActionBan}, KindInvalid},
		{"bad action", Request{Policy: "api", Key: "k", Action: "kill"}, KindInvalid},
		{"bad ip", Request{Policy: "api", Source: "ip", Key: "300.1.1.1", Action: ActionBan}, KindInvalid},
		{"bad cidr", Request{Policy: "api", Source: "cidr", Key: "10.0.0.0/33", Action: ActionBan}, KindInvalid},
		{"source not keyed", Request{Policy: "api", Source: "header:X-Other", Key: "k", Action: ActionBan}, KindInvalid},
		{"combined own key", Request{Policy: "combo", Key: "k", Action: ActionBan}, KindInvalid},
		{"ban with limit", Request{Policy: "api", Key: "k", Action: ActionBan, Limit: i64(3)}, KindInvalid},
		{"override without fields", Request{Policy: "api", Key: "k", Action: ActionOverride}, KindInvalid},
		{"override field of other algorithm", Request{Policy: "api", Key: "k", Action: ActionOverride, Limit: i64(3)}, KindInvalid},
		{"override bad rate", Request{Policy: "api", Key: "k", Action: ActionOverride, Rate: "fast"}, KindInvalid},
		{"unknown plan", Request{Policy: "tiers", Key: "k", Action: ActionOverride, Plan: "gold"}, KindInvalid},
		{"plan with fields", Request{Policy: "tiers", Key: "k", Action: ActionOverride, Plan: "pro", Rate: "1r/s"}, KindInvalid},
		{"bad expiry", Request{Policy: "api", Key: "k", Action: ActionBan, ExpiresIn: "-1h"}, KindInvalid},
	} {
		_, err := c.Set(ctx, tc.r, "t")
		var ce *Error
		if !errors.As(err, &ce) || ce.Kind != tc.kind {
			t.Errorf("%s: err %v, want kind %s", tc.name, err, tc.kind)
		}
	}
}

func TestSetFindDeleteExpire(t *testing.T) {
	c, clk := newTest(t, Options{})
	ctx := context.Background()
	e, err := c.Set(ctx, Request{Policy: "api", Key: "secret-key", Action: ActionBan, ExpiresIn: "1h", Reason: "scraping"}, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if e.Source != "header:X-Api-Key" || e.Client[:2] != "h:" || len(e.Client) != 14 || e.By != "alice" {
		t.Fatalf("entry %+v", e)
	}
	id := hashID(t, "header:X-Api-Key", "secret-key")
	now := clk.t.UnixMilli()
	r := c.Table("api").Find([]byte(id), netip.Addr{}, now)
	if r == nil || r.Action != ActionBan || r.Left(now) != time.Hour.Milliseconds() {
		t.Fatalf("find: %+v", r)
	}
	if c.Table("api").Find([]byte(hashID(t, "header:X-Api-Key", "other")), netip.Addr{}, now) != nil {
		t.Fatal("another key is banned")
	}
	if r := c.Table("api").Find([]byte(id), netip.Addr{}, now+time.Hour.Milliseconds()); r != nil {
		t.Fatalf("expired rule applies: %+v", r)
	}
	before, err := c.Delete(ctx, e.ID, "bob")
	if err != nil || before.ID != e.ID || before.Reason != "scraping" {
		t.Fatalf("delete: %+v %v", before, err)
	}
	if c.Table("api").Find([]byte(id), netip.Addr{}, now) != nil {
		t.Fatal("deleted rule applies")
	}
	if _, err := c.Get(ctx, e.ID); err == nil {
		t.Fatal("deleted entry found")
	}
}

func hashID(t *testing.T, source, key string) string {
	t.Helper()
	s, err := config.ParseSource(source)
	if err != nil {
		t.Fatal(err)
	}
	id, err := hashCredential(s, key, testConfig(t, testYAML))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestPrecedenceAndPrefixes(t *testing.T) {
	c, clk := newTest(t, Options{})
	ctx := context.Background()
	now := clk.t.UnixMilli()
	must := func(r Request) Entry {
		t.Helper()
		e, err := c.Set(ctx, r, "t")
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	key := []byte(hashID(t, "header:X-Api-Key", "k1"))
	addr := netip.MustParseAddr("203.0.113.7")
	must(Request{Policy: "api", Key: "k1", Action: ActionOverride, Rate: "100r/s", Burst: i64(50)})
	if r := c.Table("api").Find(key, addr, now); r == nil || !r.HasLimit || r.Limit.Count != 100 || r.Limit.Burst != 50 {
		t.Fatalf("override: %+v", r)
	}
	ex := must(Request{Policy: "api", Source: "cidr", Key: "203.0.113.0/24", Action: ActionExempt})
	if r := c.Table("api").Find(key, addr, now); r == nil || r.Action != ActionExempt {
		t.Fatalf("exempt over override: %+v", r)
	}
	ban := must(Request{Policy: "api", Source: "ip", Key: "::ffff:203.0.113.7", Action: ActionBan})
	if r := c.Table("api").Find(key, addr, now); r == nil || r.Action != ActionBan {
		t.Fatalf("ban over exempt (an address that adds a key): %+v", r)
	}
	if r := c.Table("api").Find(nil, netip.MustParseAddr("203.0.113.8"), now); r == nil || r.Action != ActionExempt {
		t.Fatalf("prefix: %+v", r)
	}
	for _, id := range []string{ban.ID, ex.ID} {
		if _, err := c.Delete(ctx, id, "t"); err != nil {
			t.Fatal(err)
		}
	}
	if r := c.Table("api").Find(key, addr, now); r == nil || r.Action != ActionOverride {
		t.Fatalf("after deletes: %+v", r)
	}
}

func TestOrphansAndReload(t *testing.T) {
	c, _ := newTest(t, Options{})
	ctx := context.Background()
	e, err := c.Set(ctx, Request{Policy: "api", Key: "k1", Action: ActionBan}, "t")
	if err != nil {
		t.Fatal(err)
	}
	ipe, err := c.Set(ctx, Request{Policy: "win", Key: "192.0.2.1", Action: ActionOverride, Limit: i64(10)}, "t")
	if err != nil {
		t.Fatal(err)
	}
	// The policy is now keyed by another header, and win became a bucket.
	c.Configure(testConfig(t, `
upstreams: { app: { url: "http://127.0.0.1:1" } }
policies:
  api: { algorithm: token_bucket, rate: 10r/s, burst: 5, key: header:Authorization }
  win: { algorithm: token_bucket, rate: 10r/s, burst: 5 }
routes: [ { name: all, upstream: app, policies: [api] } ]
`))
	for id, want := range map[string]string{e.ID: "key source changed", ipe.ID: `override no longer fits: field "limit" does not apply to policy win (algorithm token_bucket takes rate, burst)`} {
		got, err := c.Get(ctx, id)
		if err != nil || got.Orphan != want {
			t.Errorf("%s: orphan %q (%v), want %q", id, got.Orphan, err, want)
		}
	}
	if c.Table("api").Len() != 0 || c.Orphans() != 2 {
		t.Fatalf("applied %d, orphans %d", c.Table("api").Len(), c.Orphans())
	}
	c.Configure(testConfig(t, testYAML)) // back: both apply again
	if c.Table("api").Len() != 1 || c.Table("win").Len() != 1 || c.Orphans() != 0 {
		t.Fatalf("after restoring: api %d, win %d, orphans %d", c.Table("api").Len(), c.Table("win").Len(), c.Orphans())
	}
}

func TestStateFileAndBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "entries.json")
	c, _ := newTest(t, Options{StateFile: path, MaxEntries: 2})
	ctx := context.Background()
	for i, k := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"} {
		_, err := c.Set(ctx, Request{Policy: "win", Source: "ip", Key: k, Action: ActionBan}, "t")
		var ce *Error
		if i < 2 && err != nil || i == 2 && (!errors.As(err, &ce) || ce.Kind != KindTooMany) {
			t.Fatalf("set %d: %v", i, err)
		}
	}
	d, _ := newTest(t, Options{StateFile: path})
	list, next, err := d.List(ctx, "win", "", 1)
	if err != nil || len(list) != 1 || next == "" {
		t.Fatalf("page 1: %v %q %v", list, next, err)
	}
	rest, next, err := d.List(ctx, "win", next, 1)
	if err != nil || len(rest) != 1 || next != "" || rest[0].ID <= list[0].ID {
		t.Fatalf("page 2: %v %q %v", rest, next, err)
	}
	if d.Table("win").Find(nil, netip.MustParseAddr("192.0.2.2"), 0) == nil {
		t.Fatal("a restored ban does not apply")
	}
}

// TestEnsureIdempotent: a request identical to an applied, unexpired
// entry (policy, client, action, fields; expires_in and reason aside)
// returns that entry and creates nothing, nor signals a change; a
// different action, field value or client, or an expired original,
// creates a new entry.
func TestEnsureIdempotent(t *testing.T) {
	changes := 0
	c, clk := newTest(t, Options{OnChange: func() { changes++ }})
	changes = 0 // Configure's
	ctx := context.Background()
	t0 := clk.t
	ban := Request{Policy: "win", Source: "ip", Key: "192.0.2.9", Action: ActionBan, ExpiresIn: "1h", Reason: "a"}
	first, created, err := c.Ensure(ctx, ban, "alice")
	if err != nil || !created {
		t.Fatalf("first ban: created %v, %v", created, err)
	}
	clk.t = t0.Add(time.Minute)
	again := ban
	again.ExpiresIn, again.Reason, again.Key = "2h", "b", "::ffff:192.0.2.9" // the same address
	e, created, err := c.Ensure(ctx, again, "bob")
	if err != nil || created || e.ID != first.ID || e.Reason != "a" || e.By != "alice" || !e.Expires.Equal(t0.Add(time.Hour)) {
		t.Fatalf("identical ban: %+v created %v, %v; want entry %s as it was, not created", e, created, err, first.ID)
	}
	for _, r := range []Request{
		{Policy: "win", Source: "ip", Key: "192.0.2.9", Action: ActionExempt},
		{Policy: "win", Source: "ip", Key: "192.0.2.9", Action: ActionOverride, Limit: i64(10)},
		{Policy: "win", Source: "ip", Key: "192.0.2.9", Action: ActionOverride, Limit: i64(11)},
		{Policy: "win", Source: "cidr", Key: "192.0.2.9/32", Action: ActionBan},
	} {
		if _, created, err := c.Ensure(ctx, r, "alice"); err != nil || !created {
			t.Fatalf("%+v: created %v, %v; want a new entry", r, created, err)
		}
	}
	if _, created, _ := c.Ensure(ctx, Request{Policy: "win", Source: "ip", Key: "192.0.2.9", Action: ActionOverride, Limit: i64(10)}, "alice"); created {
		t.Fatal("identical override created again")
	}
	clk.t = t0.Add(time.Hour) // the first ban has expired
	renewed, created, err := c.Ensure(ctx, ban, "alice")
	if err != nil || !created || renewed.ID == first.ID {
		t.Fatalf("ban after expiry: %+v created %v, %v; want a new entry", renewed, created, err)
	}
	list, _, err := c.List(ctx, "win", "", 100)
	if err != nil || len(list) != 5 || changes != 6 {
		t.Fatalf("listed %d entries (%v), %d changes; want 5 and 6", len(list), err, changes)
	}
}
