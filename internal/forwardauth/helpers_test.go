package forwardauth_test

import (
	"net/http"
	"os"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"rlproxy/internal/testutil/rlproxytest"
)

// start runs rlproxy on cfg (the public and admin listeners on free ports
// unless cfg sets them; forward_auth.listen on a free port) and returns it
// with the forward-auth base URL.
func start(t *testing.T, cfg string) (*rlproxytest.Instance, string) {
	t.Helper()
	if !strings.Contains(cfg, "\nlisten:") {
		cfg = "listen: \"127.0.0.1:0\"\n" + cfg
	}
	in := rlproxytest.Start(t, cfg)
	return in, "http://" + in.App.ForwardAuthAddr()
}

// ask sends one forward-auth request from client c with header pairs.
func ask(t *testing.T, c *http.Client, url string, header ...string) (*http.Response, string) {
	t.Helper()
	return rlproxytest.Get(t, c, url, header...)
}

// requests is rlproxy_requests_total{route,policy,decision} in mfs (a scrape of /metrics).
func requests(t *testing.T, mfs map[string]*dto.MetricFamily, route, policy, decision string) float64 {
	t.Helper()
	for _, mf := range mfs {
		if mf.GetName() != "rlproxy_requests_total" {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			want := map[string]string{"route": route, "policy": policy, "decision": decision}
			for _, lp := range m.GetLabel() {
				if v, ok := want[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// requireTool skips (or, under RLPROXY_REQUIRE_TOOLS=1, fails) when a tool is missing.
func requireTool(t *testing.T, name string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("RLPROXY_REQUIRE_TOOLS") == "1" {
		t.Fatalf("%s not installed (RLPROXY_REQUIRE_TOOLS=1): %v", name, err)
	}
	t.Skipf("skipping: %s not installed: %v", name, err)
}
