package compare

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
	"rlproxy/internal/store/memory"
	"rlproxy/internal/store/valkey"
)

// Main is `rlproxy compare [-store memory|valkey] [-valkey ADDR] [-race]
// [-memory]` (docs/CONTRACT.md). It returns the process exit code: 0, 1 on a
// store error, 2 on bad flags.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kind := fs.String("store", "memory", "store to replay through: memory or valkey")
	addr := fs.String("valkey", "127.0.0.1:6379", "Valkey address for -store valkey")
	race := fs.Bool("race", false, "run the race: 50 simultaneous requests, limit 10, GET-compare-INCR then the atomic decision")
	mem := fs.Bool("memory", false, "print the bytes each algorithm keeps for one client after 1,000 requests at 1,000/hour")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "rlproxy compare: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const prefix = "rl:"
	var (
		st      store.Store
		counter Counter
		sizer   func(ctx context.Context, lim algo.Limit) (int64, error)
	)
	switch *kind {
	case "memory":
		ms := memory.New(memory.Options{MaxKeys: 1_000_000})
		st, counter = ms, &MapCounter{}
		sizer = func(ctx context.Context, lim algo.Limit) (int64, error) { return memoryBytes(ctx, ms, lim) }
	case "valkey":
		vs, err := valkey.New(ctx, valkey.Options{Addrs: []string{*addr}, KeyPrefix: prefix, Timeout: 5 * time.Second})
		if err != nil {
			fmt.Fprintln(stderr, "rlproxy compare:", err)
			return 1
		}
		c, err := vs.Client(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "rlproxy compare: connecting to valkey:", err)
			return 1
		}
		st, counter = vs, valkeyCounter{c}
		sizer = func(ctx context.Context, lim algo.Limit) (int64, error) { return valkeyBytes(ctx, vs, lim) }
	default:
		fmt.Fprintf(stderr, "rlproxy compare: -store %q: want memory or valkey\n", *kind)
		return 2
	}
	defer st.Close()

	var err error
	switch {
	case *race:
		err = printRace(ctx, stdout, st, counter, prefix)
	case *mem:
		err = printMemory(ctx, stdout, sizer)
	default:
		var t *Table
		if t, err = Run(ctx, st, prefix); err == nil {
			err = t.Print(stdout)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "rlproxy compare:", err)
		return 1
	}
	return 0
}

func printRace(ctx context.Context, w io.Writer, st store.Store, c Counter, prefix string) error {
	const n = 50
	naive, err := RaceNaive(ctx, c, prefix, n)
	if err != nil {
		return err
	}
	atomic, err := RaceAtomic(ctx, st, RaceLimit, prefix, n)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "GET-compare-INCR: allowed %d of %d (limit %d)\n", naive, n, RaceLimit.Count)
	fmt.Fprintf(w, "atomic script: allowed %d of %d (limit %d)\n", atomic, n, RaceLimit.Count)
	return nil
}

// MemoryClient is the client id whose keys -memory measures.
const MemoryClient = "c42"

// MemoryLimits are the -memory experiment's limits: 1,000 requests per hour
// in each algorithm, in the reference column order.
func MemoryLimits() []algo.Limit {
	const n, hour = 1000, 3_600_000
	return []algo.Limit{
		{Kind: algo.FixedWindow, Count: n, Period: hour},
		{Kind: algo.SlidingLog, Count: n, Period: hour},
		{Kind: algo.SlidingWindow, Count: n, Period: hour},
		{Kind: algo.TokenBucket, Count: n, Period: hour, Burst: n},
		{Kind: algo.LeakyBucket, Count: n, Period: hour, Burst: n - 1, NoDelay: true},
	}
}

// MemoryKey is the key of client c42 for lim in the -memory experiment.
func MemoryKey(prefix string, lim algo.Limit) string {
	return prefix + store.KeyVersion + "{" + MemoryClient + "}:" + lim.Kind.String()
}

// fill sends 1,000 requests at 1,000/hour (one per 3.6 s) for lim to key,
// on fresh state.
func fill(ctx context.Context, st store.Store, key string, lim algo.Limit) error {
	var out [1]algo.Decision
	for i := range int64(1000) {
		ck := [1]store.Check{{Key: key, Limit: lim, Cost: 1}}
		if _, err := st.Decide(ctx, ck[:], algo.ReferenceBase+3600*i, out[:]); err != nil {
			return err
		}
	}
	return nil
}

func valkeyBytes(ctx context.Context, vs *valkey.Store, lim algo.Limit) (int64, error) {
	c, err := vs.Client(ctx)
	if err != nil {
		return 0, err
	}
	key := MemoryKey("rl:", lim)
	// Fresh state, and only this algorithm's keys counted for c42.
	if keys, err := vs.ClientKeys(ctx, MemoryClient); err == nil && len(keys) > 0 {
		for _, k := range keys {
			_ = c.Do(ctx, c.B().Del().Key(k).Build()).Error()
		}
	}
	if err := fill(ctx, vs, key, lim); err != nil {
		return 0, err
	}
	n, err := vs.MemoryUsage(ctx, MemoryClient)
	_ = c.Do(ctx, c.B().Del().Key(key).Build()).Error()
	return n, err
}

func printMemory(ctx context.Context, w io.Writer, sizer func(context.Context, algo.Limit) (int64, error)) error {
	fmt.Fprintf(w, "bytes kept for one client (%s) after 1,000 requests at 1,000/hour:\n", MemoryClient)
	for _, lim := range MemoryLimits() {
		n, err := sizer(ctx, lim)
		if err != nil {
			return fmt.Errorf("measuring %s: %w", lim.Kind, err)
		}
		fmt.Fprintf(w, "%s: %d B\n", lim.Kind, n)
	}
	return nil
}

// valkeyCounter is Counter on Valkey: GET, then INCR, as separate commands.
type valkeyCounter struct{ c valkeygo.Client }

func (v valkeyCounter) Get(ctx context.Context, key string) (int64, error) {
	n, err := v.c.Do(ctx, v.c.B().Get().Key(key).Build()).AsInt64()
	if valkeygo.IsValkeyNil(err) {
		return 0, nil
	}
	return n, err
}

func (v valkeyCounter) Incr(ctx context.Context, key string) error {
	if err := v.c.Do(ctx, v.c.B().Incr().Key(key).Build()).Error(); err != nil {
		return err
	}
	// Every key gets an expiry, even the naive limiter's.
	return v.c.Do(ctx, v.c.B().Pexpire().Key(key).Milliseconds(RaceLimit.Period).Build()).Error()
}

func memoryBytes(ctx context.Context, ms *memory.Store, lim algo.Limit) (int64, error) {
	key := MemoryKey("rl:", lim)
	if err := fill(ctx, ms, key, lim); err != nil {
		return 0, err
	}
	return ms.StateBytes(key), nil
}
