package live

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"rlproxy/internal/config"
	"rlproxy/internal/policy"
	"rlproxy/internal/reqview"
	"rlproxy/internal/store/memory"
	"rlproxy/internal/topk"
)

// clock is an injected time, advanced by tests.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }
func newClock(t time.Time) *clock    { c := &clock{}; c.ns.Store(t.UnixNano()); return c }
func same(id string) string          { return id }
func limiter(t testing.TB) (*config.Config, *policy.Limiter) {
	t.Helper()
	cfg, err := config.ParseWith("live.yaml", []byte(`
upstreams: { app: { url: "http://127.0.0.1:1" } }
policies:
  per_ip: { algorithm: token_bucket, rate: 1r/m, burst: 2, key: ip }
  shape: { algorithm: leaky_bucket, rate: 1r/m, burst: 5, key: global }
routes:
  - { name: api, upstream: app, policies: [per_ip], match: { path_prefix: /api } }
  - { name: slow, upstream: app, policies: [shape] }
  - { name: open, upstream: app }
`), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ms := memory.New(memory.Options{MaxKeys: 1000, SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	l, err := policy.New(cfg, policy.Options{Store: ms})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, l
}

// TestObserveAndSnapshot decides real requests and checks the per-second
// rates of each route and the top refused client of the policy.
func TestObserveAndSnapshot(t *testing.T) {
	cfg, l := limiter(t)
	c := newClock(time.Unix(1_700_000_000, 0))
	rec := New(c.now)
	rec.Configure(cfg)
	rec.Sample()
	api, slow := l.Routes()[0], l.Routes()[1]
	var res policy.Result
	decide := func(rt *policy.Route, ip string) {
		v, _ := reqview.Read(httptest.NewRequest("GET", "/api", nil))
		if err := l.Decide(context.Background(), rt, &v, netip.MustParseAddr(ip), &res); err != nil {
			t.Fatal(err)
		}
		rec.Observe(rt, &res)
	}
	for range 7 { // burst 2: 2 allowed, 5 refused
		decide(api, "192.0.2.1")
	}
	decide(api, "192.0.2.2") // allowed
	decide(api, "192.0.2.2") // allowed
	decide(api, "192.0.2.2") // refused
	decide(slow, "192.0.2.3")
	decide(slow, "192.0.2.3")       // delayed behind the first
	rec.Observe(l.Routes()[2], nil) // a route without policies: allowed
	c.add(2 * time.Second)
	rec.Sample()
	s := rec.Snapshot(20, same)
	if len(s.Routes) != 3 || s.Routes[0].Name != "api" || s.Routes[1].Name != "slow" || s.Routes[2].Name != "open" {
		t.Fatalf("routes %+v; want api, slow, open", s.Routes)
	}
	if o := s.Routes[2]; fmt.Sprint(o.Allowed, o.Refused) != "[0.5] [0]" {
		t.Errorf("open rates allowed/refused %v %v; want [0.5] [0]", o.Allowed, o.Refused)
	}
	if a := s.Routes[0]; fmt.Sprint(a.Allowed, a.Delayed, a.Refused) != "[2] [0] [3]" {
		t.Errorf("api rates allowed/delayed/refused %v %v %v; want [2] [0] [3] (per second over 2 s)", a.Allowed, a.Delayed, a.Refused)
	}
	if b := s.Routes[1]; fmt.Sprint(b.Allowed, b.Delayed, b.Refused) != "[0.5] [0.5] [0]" {
		t.Errorf("slow rates %v %v %v; want [0.5] [0.5] [0]", b.Allowed, b.Delayed, b.Refused)
	}
	want := []topk.Entry{{ID: "ip:192.0.2.1", Count: 5}, {ID: "ip:192.0.2.2", Count: 1}}
	if len(s.Top) != 1 || s.Top[0].Policy != "per_ip" || s.Top[0].Refused != 6 || fmt.Sprint(s.Top[0].Clients) != fmt.Sprint(want) {
		t.Errorf("top %+v; want per_ip with 6 refusals: %v", s.Top, want)
	}
	if n := testing.AllocsPerRun(100, func() { rec.Observe(api, &res) }); n != 0 {
		t.Errorf("Observe of a refusal allocates %v times; want 0", n)
	}
}

// TestHistoryIsBounded samples past the ring's size: History rates remain,
// the newest last, and a reload keeps a route's history.
func TestHistoryIsBounded(t *testing.T) {
	cfg, l := limiter(t)
	c := newClock(time.Unix(1_700_000_000, 0))
	rec := New(c.now)
	rec.Configure(cfg)
	var res policy.Result
	res.Outcome = policy.Pass
	for i := range History + 50 {
		if i == History+49 {
			rec.Observe(l.Routes()[0], &res)
		}
		rec.Sample()
		c.add(time.Second)
	}
	rec.Configure(cfg) // a reload
	a := rec.Snapshot(20, same).Routes[0]
	if len(a.Allowed) != History || a.Allowed[History-1] != 1 || a.Allowed[History-2] != 0 {
		t.Fatalf("%d rates, last two %v; want %d ending 0, 1", len(a.Allowed), a.Allowed[len(a.Allowed)-2:], History)
	}
}

func TestClientID(t *testing.T) {
	for key, want := range map[string]string{
		"rl:v1:{ip:192.0.2.1}:per_ip:tb": "ip:192.0.2.1",
		"v1:{h:0123}:api":                "h:0123",
		"nobraces":                       "nobraces",
	} {
		if got := ClientID(key); got != want {
			t.Errorf("ClientID(%q) = %q; want %q", key, got, want)
		}
	}
}

// BenchmarkObserve is the request path's cost of the live view: an
// allowed request (one atomic add) and a refusal (plus a top-K update).
func BenchmarkObserve(b *testing.B) {
	cfg, l := limiter(b)
	rec := New(time.Now)
	rec.Configure(cfg)
	api := l.Routes()[0]
	ip := netip.MustParseAddr("192.0.2.1")
	for _, c := range []struct {
		name string
		n    int
	}{{"allowed", 1}, {"refused", 8}} { // burst 2: the 1st request passes, the 8th is refused
		var res policy.Result
		for range c.n {
			v, _ := reqview.Read(httptest.NewRequest("GET", "/api", nil))
			if err := l.Decide(context.Background(), api, &v, ip, &res); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec.Observe(api, &res)
			}
		})
	}
}
