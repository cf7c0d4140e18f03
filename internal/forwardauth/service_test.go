package forwardauth_test

import (
	"net/http"
	"testing"

	"rlproxy/internal/config"
	"rlproxy/internal/testutil/rlproxytest"
)

// TestDecisionServiceOnly: with listen: "" no proxy listener is opened,
// routes need no upstream, and forward_auth decides. It needs the config
// layer to accept `listen: ""` and routes without upstream (the decoder's
// part); until then it is skipped with the loader's message.
func TestDecisionServiceOnly(t *testing.T) {
	cfg := `listen: ""
admin_listen: ""
forward_auth: {listen: "127.0.0.1:0"}
real_ip: {trusted_proxies: [127.0.0.1/32]}
policies:
  api: {algorithm: token_bucket, rate: 1r/m, burst: 1}
routes:
  - {name: api, policies: [api]}
`
	if _, err := config.ParseWith("x.yaml", []byte(cfg), config.LoadOptions{}); err != nil {
		t.Fatalf("a decision service config (listen: \"\", routes without upstream) is refused: %v", err)
	}
	in := rlproxytest.Start(t, cfg)
	if a := in.App.Addr(); a != "" {
		t.Fatalf("the proxy listener is open on %s", a)
	}
	fa := "http://" + in.App.ForwardAuthAddr()
	for _, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		if resp, body := ask(t, nil, fa+"/", "X-Original-URI", "/x"); resp.StatusCode != want {
			t.Fatalf("got %d %s, want %d", resp.StatusCode, body, want)
		}
	}
}
