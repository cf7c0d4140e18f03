package compare

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/store/memory"
	"rlproxy/internal/store/valkey"
	"rlproxy/internal/testutil/redisserver"
)

// want is docs/PRODUCT.md's reference table, exactly, in `rlproxy compare` format.
const want = `traffic  fixed window  sliding log  sliding counter  token bucket  leaky bucket
edge     20/20         10/20        11/20            10/20         10/20
steady   60/180        60/180       60/180           69/180        69/180
burst    10/30         10/30        10/30            10/30         10/30
leaky bucket, edge: longest wait for its turn 8.6 s
leaky bucket, steady: longest wait for its turn 8.7 s
leaky bucket, burst: longest wait for its turn 8.7 s
fixed window: most requests reaching the upstream in any 1 s: 20
sliding log: most requests reaching the upstream in any 1 s: 10
sliding counter: most requests reaching the upstream in any 1 s: 11
token bucket: most requests reaching the upstream in any 1 s: 10
leaky bucket: most requests reaching the upstream in any 1 s: 2
`

func valkeyStore(t *testing.T) (*valkey.Store, *redisserver.Server) {
	t.Helper()
	srv := redisserver.Start(t)
	vs, err := valkey.New(context.Background(), valkey.Options{Addrs: []string{srv.Addr}, KeyPrefix: "rl:", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vs.Close() })
	return vs, srv
}

// TestReferenceTable asserts every number of docs/PRODUCT.md's experiment on
// both stores, and that the two stores' tables are identical request by
// request (serve times included).
func TestReferenceTable(t *testing.T) {
	vs, _ := valkeyStore(t)
	stores := map[string]store.Store{"memory": memory.New(memory.Options{MaxKeys: 1000}), "valkey": vs}
	tables := map[string]*Table{}
	for name, st := range stores {
		tab, err := Run(context.Background(), st, "rl:")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var out bytes.Buffer
		if err := tab.Print(&out); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Errorf("%s store printed\n%s\nwant\n%s", name, out.String(), want)
		}
		tables[name] = tab
	}
	m, v := tables["memory"], tables["valkey"]
	for i := range m.Cells {
		for j := range m.Cells[i] {
			if a, b := m.Cells[i][j].Served, v.Cells[i][j].Served; !equal(a, b) {
				t.Errorf("%s/%s: memory served %v, valkey %v", m.Patterns[i], m.Limits[j].Kind, a, b)
			}
		}
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRace: GET-compare-INCR lets far more than the limit through; one
// atomic decision lets exactly the limit through, for every algorithm, at
// 50 and 500 simultaneous requests.
func TestRace(t *testing.T) {
	vs, _ := valkeyStore(t)
	ctx := context.Background()
	c, err := vs.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	naive, err := RaceNaive(ctx, valkeyCounter{c}, "rl:", 50)
	if err != nil {
		t.Fatal(err)
	}
	if naive <= 10 {
		t.Errorf("GET-compare-INCR allowed %d of 50; the race should let more than 10 through", naive)
	}
	hour := int64(3_600_000)
	limits := []algo.Limit{
		RaceLimit,
		{Kind: algo.SlidingLog, Count: 10, Period: hour},
		{Kind: algo.SlidingWindow, Count: 10, Period: hour},
		{Kind: algo.TokenBucket, Count: 1, Period: hour, Burst: 10},
		{Kind: algo.LeakyBucket, Count: 1, Period: hour, Burst: 9, NoDelay: true},
		{Kind: algo.Concurrency, Count: 10, Period: hour},
	}
	stores := map[string]store.Store{"memory": memory.New(memory.Options{MaxKeys: 1000}), "valkey": vs}
	for name, st := range stores {
		for _, lim := range limits {
			for _, n := range []int{50, 500} {
				got, err := RaceAtomic(ctx, st, lim, "rl:", n)
				if err != nil {
					t.Fatalf("%s %s: %v", name, lim.Kind, err)
				}
				if got != 10 {
					t.Errorf("%s store, %s, %d simultaneous: allowed %d, want exactly 10", name, lim.Kind, n, got)
				}
			}
		}
	}
}

// TestMainOutput runs the subcommand as a user would, on both stores.
func TestMainOutput(t *testing.T) {
	_, srv := valkeyStore(t)
	for _, args := range [][]string{nil, {"-store", "valkey", "-valkey", srv.Addr}} {
		var out, errb bytes.Buffer
		if code := Main(args, &out, &errb); code != 0 {
			t.Fatalf("compare %v: exit %d: %s", args, code, errb.String())
		}
		if out.String() != want {
			t.Errorf("compare %v printed\n%s", args, out.String())
		}
		out.Reset()
		if code := Main(append(args, "-race"), &out, &errb); code != 0 {
			t.Fatalf("compare -race: exit %d: %s", code, errb.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "GET-compare-INCR: allowed ") || lines[1] != "atomic script: allowed 10 of 50 (limit 10)" {
			t.Errorf("compare -race printed %q", out.String())
		}
	}
}

// TestMemoryPerClient asserts the bounds on Redis 7.0: ≤ 128 B for
// fixed window, token and leaky bucket, ≤ 192 B for the sliding counter, and
// the sliding log ≥ 500× the fixed window.
func TestMemoryPerClient(t *testing.T) {
	vs, _ := valkeyStore(t)
	ctx := context.Background()
	got := map[algo.Kind]int64{}
	for _, lim := range MemoryLimits() {
		n, err := valkeyBytes(ctx, vs, lim)
		if err != nil {
			t.Fatal(err)
		}
		got[lim.Kind] = n
		t.Logf("%s: %d B", lim.Kind, n)
	}
	for _, k := range []algo.Kind{algo.FixedWindow, algo.TokenBucket, algo.LeakyBucket} {
		if got[k] <= 0 || got[k] > 128 {
			t.Errorf("%s keeps %d B per client, want 1..128", k, got[k])
		}
	}
	if got[algo.SlidingWindow] <= 0 || got[algo.SlidingWindow] > 192 {
		t.Errorf("sliding counter keeps %d B, want 1..192", got[algo.SlidingWindow])
	}
	if got[algo.SlidingLog] < 500*got[algo.FixedWindow] {
		t.Errorf("sliding log keeps %d B, want ≥ 500 × fixed window (%d B)", got[algo.SlidingLog], got[algo.FixedWindow])
	}
}
