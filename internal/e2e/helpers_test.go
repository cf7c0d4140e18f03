package e2e

// Setup and waiting helpers shared by every test file of the package.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/redisserver"
	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// e2eStores are the stores a test runs on when it runs on each.
var e2eStores = []string{"memory", "valkey"}

// e2eStore returns the store section for name ("memory" or "valkey") and,
// for valkey, the fresh redis-server behind it (nil for memory). The Valkey
// timeout is 5 s: a loaded test machine must not turn a slow answer into a
// fail-open pass that spoils exact counts (under a CPU hog beside the
// suite, round trips of over 1 s were seen).
func e2eStore(t *testing.T, name string) (string, *redisserver.Server) {
	t.Helper()
	if name == "memory" {
		return "store: { type: memory }\n", nil
	}
	srv := redisserver.Start(t)
	return fmt.Sprintf("store: { type: valkey, valkey: { addrs: [%q], timeout: 5s } }\n", srv.Addr), srv
}

// storeYAML is e2eStore's store section alone.
func storeYAML(t *testing.T, name string) string {
	t.Helper()
	y, _ := e2eStore(t, name)
	return y
}

// e2eStart starts a recording upstream and, in front of it, an rlproxy
// (see e2eStartBehind).
func e2eStart(t *testing.T, st, cfg string, opts ...rlproxytest.Option) (*rlproxytest.Instance, *rlproxytest.Upstream) {
	t.Helper()
	up := rlproxytest.NewUpstream(t)
	return e2eStartBehind(t, st, up.URL, cfg, opts...), up
}

// e2eStartBehind starts an rlproxy on the store named st (see e2eStore)
// whose configuration is the store section followed by cfg, in which the
// single %q verb becomes upstreamURL.
func e2eStartBehind(t *testing.T, st, upstreamURL, cfg string, opts ...rlproxytest.Option) *rlproxytest.Instance {
	t.Helper()
	return rlproxytest.Start(t, storeYAML(t, st)+fmt.Sprintf(cfg, upstreamURL), opts...)
}

// e2eAccessLog is a log section writing the access log as JSON lines to
// access.log beside the config, where e2eWaits reads it.
const e2eAccessLog = "log: { access: { path: access.log } }\n"

// e2eWaits waits until in's access log (see e2eAccessLog) holds n lines and
// returns the decided shaping wait in ms of each request for path answered
// 200 (0 when it was not delayed), ascending. The wait is the one decided, not a measured time,
// so with an injected clock it is exact however loaded the machine is.
func e2eWaits(t *testing.T, in *rlproxytest.Instance, path string, n int) []int64 {
	t.Helper()
	file := filepath.Join(filepath.Dir(in.ConfigPath), "access.log")
	var lines []string
	waitfor.True(t, fmt.Sprintf("%d access log lines", n), func() bool {
		// Complete lines only: the logger may be writing the next one.
		b, _ := os.ReadFile(file)
		b = b[:bytes.LastIndexByte(b, '\n')+1]
		lines = strings.Split(strings.TrimSpace(string(b)), "\n")
		return len(b) > 0 && len(lines) >= n
	})
	var waits []int64
	for _, l := range lines {
		var e struct {
			Path     string
			Status   int
			Decision string
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("access log line %q: %v", l, err)
		}
		if e.Path != path || e.Status != http.StatusOK {
			continue
		}
		var ms int64
		if _, err := fmt.Sscanf(e.Decision, "delayed %d ms", &ms); err != nil && strings.HasPrefix(e.Decision, "delayed") {
			t.Fatalf("access log decision %q", e.Decision)
		}
		waits = append(waits, ms)
	}
	slices.Sort(waits)
	return waits
}

// e2eAwayFromBoundary waits, when needed, so that the next `need` of real
// time stays inside one epoch-aligned window of length w (fixed and hourly
// windows align to the Unix epoch; requests straddling a boundary would see
// two windows). It sleeps 100 ms past the boundary.
func e2eAwayFromBoundary(t *testing.T, w, need time.Duration) {
	t.Helper()
	now := time.Now()
	left := w - time.Duration(now.UnixMilli()%w.Milliseconds())*time.Millisecond
	if left < need {
		t.Logf("waiting %v for the next %v window", left, w)
		time.Sleep(left + 100*time.Millisecond)
	}
}
