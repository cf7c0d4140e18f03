package envoyrls_test

import (
	"context"
	"strconv"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"rlproxy/internal/config"
	"rlproxy/internal/envoyrls"
	"rlproxy/internal/policy"
	"rlproxy/internal/store/memory"
)

// BenchmarkShouldRateLimit is one call with one descriptor on the memory
// store, without the network (bench/rls.sh measures it over gRPC on Redis).
func BenchmarkShouldRateLimit(b *testing.B) {
	cfg, err := config.ParseWith("rls.yaml", []byte(cfgYAML), config.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	st := memory.New(memory.Options{SweepInterval: -1})
	defer st.Close()
	lim, err := policy.New(cfg, policy.Options{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	svc := envoyrls.New(nil, nil)
	svc.Swap(cfg, lim)
	reqs := make([]*rlsv3.RateLimitRequest, 1024)
	for i := range reqs {
		reqs[i] = &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", "u"+strconv.Itoa(i))}}
	}
	b.ReportAllocs()
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		if _, err := svc.ShouldRateLimit(ctx, reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
	}
}
