package upstream

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"rlproxy/internal/config"
)

// stubTransport answers 200 or fails with a dial error; it counts calls.
type stubTransport struct {
	down  bool
	calls int
}

func (s *stubTransport) RoundTrip(*http.Request) (*http.Response, error) {
	s.calls++
	if s.down {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	}
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

func (s *stubTransport) Close() {}

// testPool builds a pool over stub transports, one per host of u.
func testPool(t *testing.T, u *config.Upstream, now *time.Time) (*Pool, map[string]*stubTransport) {
	t.Helper()
	stubs := map[string]*stubTransport{}
	set := NewSet(Options{
		NewTransport: func(_ *config.Upstream, s *url.URL) (Transport, error) {
			st := &stubTransport{}
			stubs[s.Host] = st
			return st, nil
		},
		Now: func() time.Time { return *now },
	})
	t.Cleanup(set.Close)
	pools, err := set.Update(&config.Config{Upstreams: map[string]*config.Upstream{u.Name: u}})
	if err != nil {
		t.Fatal(err)
	}
	return pools[u.Name], stubs
}

func upstreamOf(balance string, weights ...int) *config.Upstream {
	u := &config.Upstream{Name: "app", Balance: balance, MaxFails: 1, FailTimeout: 10 * time.Second, Retries: 1}
	for i, w := range weights {
		v, _ := url.Parse(fmt.Sprintf("http://10.0.0.%d:80", i+1))
		u.Servers = append(u.Servers, config.UpstreamServer{URL: v, Weight: w})
	}
	u.URL = u.Servers[0].URL
	return u
}

// TestSmoothWeightedSequence: weights 5,1,1 give nginx's interleaved
// sequence a a b a c a a, not five a in a row.
func TestSmoothWeightedSequence(t *testing.T) {
	now := time.Unix(1000, 0)
	p, _ := testPool(t, upstreamOf(config.BalanceRoundRobin, 5, 1, 1), &now)
	got := ""
	for range 7 {
		got += string(rune('a' + p.pick(now.UnixNano(), 0, 0)))
	}
	if got != "aabacaa" {
		t.Errorf("sequence %q, want aabacaa", got)
	}
}

// TestPassiveHealth: max_fails failures take a server out for
// fail_timeout; then one trial request goes to it; success puts it back.
func TestPassiveHealth(t *testing.T) {
	now := time.Unix(1000, 0)
	u := upstreamOf(config.BalanceRoundRobin, 1, 1)
	u.MaxFails, u.Retries = 2, 0
	p, stubs := testPool(t, u, &now)
	b := stubs["10.0.0.2:80"]
	b.down = true
	req := func() error {
		r, _ := http.NewRequest(http.MethodGet, "http://10.0.0.1:80/", nil)
		_, err := p.RoundTrip(r)
		return err
	}
	fails := 0
	for range 10 {
		if req() != nil {
			fails++
		}
	}
	if fails != 2 || b.calls != 2 {
		t.Errorf("%d failures, %d calls to b; want max_fails (2) of each", fails, b.calls)
	}
	now = now.Add(10*time.Second + time.Millisecond)
	b.down = false
	for range 4 {
		_ = req()
	}
	if b.calls != 4 { // the trial, then round robin again
		t.Errorf("after fail_timeout: %d calls to b, want 4", b.calls)
	}
}

// TestNoHealthy: every server down → ErrNoHealthy without a call.
func TestNoHealthy(t *testing.T) {
	now := time.Unix(1000, 0)
	u := upstreamOf(config.BalanceLeastConn, 1, 1)
	p, stubs := testPool(t, u, &now)
	for _, s := range p.Servers() {
		s.activeDown.Store(true)
	}
	r, _ := http.NewRequest(http.MethodGet, "http://10.0.0.1:80/", nil)
	if _, err := p.RoundTrip(r); !errors.Is(err, ErrNoHealthy) {
		t.Errorf("err %v, want ErrNoHealthy", err)
	}
	if stubs["10.0.0.1:80"].calls+stubs["10.0.0.2:80"].calls != 0 {
		t.Error("a down server was called")
	}
}

// TestRingMovesOneNth: removing one of 4 servers moves only its own
// clients (about a quarter), and a down server's clients go to the next
// server on the ring, the others stay.
func TestRingMovesOneNth(t *testing.T) {
	now := time.Unix(1000, 0)
	p4, _ := testPool(t, upstreamOf(config.BalanceClientHash, 1, 1, 1, 1), &now)
	p3, _ := testPool(t, upstreamOf(config.BalanceClientHash, 1, 1, 1), &now)
	const clients = 10000
	moved := 0
	for i := range clients {
		h := uint32(i) * 2654435761 // spread over the ring
		a, b := p4.pick(now.UnixNano(), 0, h), p3.pick(now.UnixNano(), 0, h)
		if a != 3 && a != b {
			t.Fatalf("client %d moved from %d to %d though its server stayed", i, a, b)
		}
		if a == 3 {
			moved++
		}
	}
	if moved < clients/8 || moved > clients*3/8 {
		t.Errorf("%d of %d clients moved, want about 1/4", moved, clients)
	}
	p4.servers[3].activeDown.Store(true)
	for i := range clients {
		h := uint32(i) * 2654435761
		if a, b := p4.pick(now.UnixNano(), 0, h), p3.pick(now.UnixNano(), 0, h); a != b {
			t.Fatalf("client %d: %d with server 3 down, %d without it: want the next server on the ring", i, a, b)
		}
	}
}

// TestRingBalance: client_hash spreads clients evenly over servers whose
// labels differ in a few digits (loopback ports, the last octet), which
// CRC-32 alone did not: its linearity left the server on port 40182 of
// 40169, 40182 and 40195 a fifth of the clients, and 29 other placements
// here under a quarter.
func TestRingBalance(t *testing.T) {
	now := time.Unix(1000, 0)
	const clients = 3000
	var sets [][]string
	for k := range 100 {
		p := 40000 + 13*k
		sets = append(sets, []string{fmt.Sprintf("127.0.0.1:%d", p), fmt.Sprintf("127.0.0.1:%d", p+13), fmt.Sprintf("127.0.0.1:%d", p+26)})
	}
	for k := range 50 {
		sets = append(sets, []string{fmt.Sprintf("10.0.%d.1:8080", k), fmt.Sprintf("10.0.%d.2:8080", k), fmt.Sprintf("10.0.%d.3:8080", k)})
	}
	worst := clients
	for _, hosts := range sets {
		u := upstreamOf(config.BalanceClientHash, 1, 1, 1)
		for i, h := range hosts {
			u.Servers[i].URL = &url.URL{Scheme: "http", Host: h}
		}
		u.URL = u.Servers[0].URL
		p, _ := testPool(t, u, &now)
		share := make([]int, len(hosts))
		for c := range clients {
			share[p.pick(now.UnixNano(), 0, ringHash([]byte("client-"+strconv.Itoa(c))))]++
		}
		for i, n := range share {
			worst = min(worst, n)
			if n < clients/4 {
				t.Errorf("servers %v: %s has %d of %d clients (%v), want at least a quarter", hosts, hosts[i], n, clients, share)
			}
		}
	}
	t.Logf("%d placements of 3 servers: the fewest clients a server got was %d of %d", len(sets), worst, clients)
}

// closeCounter is a stub transport that counts Close calls.
type closeCounter struct {
	stubTransport
	closed int
}

func (c *closeCounter) Close() { c.closed++ }

// TestSetKeepsUnchangedServers: a reload keeps an unchanged server (its
// health state included), builds a changed one anew and closes a removed one.
func TestSetKeepsUnchangedServers(t *testing.T) {
	made := map[string]*closeCounter{}
	set := NewSet(Options{NewTransport: func(_ *config.Upstream, s *url.URL) (Transport, error) {
		c := &closeCounter{}
		made[s.Host] = c
		return c, nil
	}})
	defer set.Close()
	u := upstreamOf(config.BalanceRoundRobin, 1, 1, 1)
	p1, err := set.Update(&config.Config{Upstreams: map[string]*config.Upstream{"app": u}})
	if err != nil {
		t.Fatal(err)
	}
	kept := p1["app"].Servers()[0]
	kept.downUntil.Store(time.Now().Add(time.Hour).UnixNano()) // held out by passive health
	third := made["10.0.0.3:80"]
	u2 := upstreamOf(config.BalanceRoundRobin, 1, 1)
	u2.HealthCheck = &config.HealthCheck{Path: "/", Interval: time.Hour, Timeout: time.Second, Fails: 1, Passes: 1}
	p2, err := set.Update(&config.Config{Upstreams: map[string]*config.Upstream{"app": u2}})
	if err != nil {
		t.Fatal(err)
	}
	if p2["app"].Servers()[0] != kept || kept.Up(time.Now()) {
		t.Error("the unchanged server was rebuilt or lost its passive state")
	}
	if third.closed != 1 {
		t.Errorf("removed server's transport closed %d times, want 1", third.closed)
	}
	if kept.prober == nil {
		t.Error("health_check added: no prober started")
	}
	u3 := upstreamOf(config.BalanceRoundRobin, 1, 1)
	u3.ResponseHeaderTimeout = time.Second // a transport setting: new servers
	p3, _ := set.Update(&config.Config{Upstreams: map[string]*config.Upstream{"app": u3}})
	if p3["app"].Servers()[0] == kept || kept.prober != nil {
		t.Error("a changed transport setting kept the old server, or its prober runs on")
	}
}
