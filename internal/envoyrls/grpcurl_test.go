package envoyrls_test

// grpcurl (fullstorydev/grpcurl, a real third-party gRPC client that knows
// no Go types of ours) against a running rlproxy's envoy_rls listener: it
// finds the service and the message types through server reflection alone.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// grpcurlInstall is how scripts/test.sh installs grpcurl when missing.
const grpcurlInstall = "GOFLAGS= go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4"

// needGrpcurl returns grpcurl's path. Without it the test is skipped, the
// reason also printed on stderr (seen under -v and when go test runs in a
// package directory without arguments), and fails under
// RLPROXY_REQUIRE_TOOLS=1 (scripts/test.sh), so a missing install step
// cannot pass silently.
func needGrpcurl(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("grpcurl")
	if err == nil {
		return p
	}
	msg := fmt.Sprintf("grpcurl not on PATH (%v): the reflection test against envoy_rls did NOT run; install it with %s", err, grpcurlInstall)
	if os.Getenv("RLPROXY_REQUIRE_TOOLS") == "1" {
		t.Fatalf("%s (RLPROXY_REQUIRE_TOOLS=1)", msg)
	}
	fmt.Fprintf(os.Stderr, "SKIP %s: %s\n", t.Name(), msg)
	t.Skip(msg)
	return ""
}

// grpcurl runs the binary with args and returns its standard output.
func grpcurl(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-plaintext", "-max-time", "10"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("grpcurl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// rlsJSON is the part of a RateLimitResponse, in protobuf's JSON mapping as
// grpcurl prints it, that the test checks.
type rlsJSON struct {
	OverallCode string `json:"overallCode"`
	Statuses    []struct {
		Code           string `json:"code"`
		LimitRemaining *int64 `json:"limitRemaining"`
		CurrentLimit   struct {
			Name            string `json:"name"`
			RequestsPerUnit int64  `json:"requestsPerUnit"`
			Unit            string `json:"unit"`
		} `json:"currentLimit"`
		DurationUntilReset string `json:"durationUntilReset"`
	} `json:"statuses"`
}

const grpcurlCfg = `
upstreams: {app: {builtin: echo}}
policies:
  fw: {algorithm: fixed_window, limit: 3, window: 1h}
routes: [{name: none, upstream: app}]
envoy_rls:
  listen: "127.0.0.1:0"
  mappings:
    - {name: per-ip, domain: edge, descriptor: [{key: remote_address}], policies: [fw]}
`

// TestGrpcurlReflection: `grpcurl list` shows the RLS through reflection,
// and ShouldRateLimit called by grpcurl from JSON answers OK × 3 with
// limitRemaining 2, 1, 0, then OVER_LIMIT with 0, as the policy counts.
func TestGrpcurlReflection(t *testing.T) {
	bin := needGrpcurl(t)
	in, _, _ := startRLS(t, grpcurlCfg)
	addr := in.App.EnvoyRLSAddr()
	services := strings.Fields(grpcurl(t, bin, addr, "list"))
	for _, want := range []string{"envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health"} {
		if !strings.Contains(strings.Join(services, " "), want) {
			t.Fatalf("grpcurl list: %v, want %s among them", services, want)
		}
	}
	const req = `{"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address", "value": "203.0.113.5"}]}]}`
	for i := 1; i <= 4; i++ {
		out := grpcurl(t, bin, "-emit-defaults", "-d", req, addr, "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
		var r rlsJSON
		if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Statuses) != 1 {
			t.Fatalf("call %d: %v; grpcurl printed:\n%s", i, err, out)
		}
		s := r.Statuses[0]
		wantCode, wantRemaining := "OK", int64(3-i)
		if i == 4 {
			wantCode, wantRemaining = "OVER_LIMIT", 0
		}
		if r.OverallCode != wantCode || s.Code != wantCode || s.LimitRemaining == nil || *s.LimitRemaining != wantRemaining {
			t.Fatalf("call %d: want %s with limitRemaining %d; grpcurl printed:\n%s", i, wantCode, wantRemaining, out)
		}
		if s.CurrentLimit.Name != "fw" || s.CurrentLimit.RequestsPerUnit != 3 || s.CurrentLimit.Unit != "HOUR" {
			t.Fatalf("call %d: currentLimit %+v, want fw 3 per HOUR", i, s.CurrentLimit)
		}
		reset, err := time.ParseDuration(s.DurationUntilReset)
		if err != nil || reset <= 0 || reset > time.Hour {
			t.Fatalf("call %d: durationUntilReset %q, want within the hour window", i, s.DurationUntilReset)
		}
	}
}
