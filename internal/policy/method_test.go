package policy

import (
	"net/http"
	"testing"

	"rlproxy/internal/config"
	"rlproxy/internal/reqview"
	"rlproxy/internal/store/memory"
)

// TestMatchHeadAsGet: a route listing GET also matches HEAD (the upstream
// runs the GET handler for it), and only GET's routes do: HEAD /g and
// GET /g choose the limited route, POST /g and HEAD /p the catch-all.
func TestMatchHeadAsGet(t *testing.T) {
	const routes = `
upstreams: { app: { url: "http://127.0.0.1:1" } }
policies: { p: { algorithm: token_bucket, rate: 1r/m, burst: 1, key: ip } }
routes:
  - { name: get, match: { path_prefix: /g, methods: [GET] }, upstream: app, policies: [p] }
  - { name: post, match: { path_prefix: /p, methods: [POST] }, upstream: app, policies: [p] }
  - { name: all, upstream: app }
`
	cfg, err := config.ParseWith("m.yaml", []byte(routes), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(cfg, Options{Store: memory.New(memory.Options{SweepInterval: -1})})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/g", "get"},
		{"HEAD", "/g", "get"},
		{"POST", "/g", "all"},
		{"POST", "/p", "post"},
		{"HEAD", "/p", "all"},
	} {
		r := &http.Request{Method: tc.method, RequestURI: tc.path, Host: "h", Header: http.Header{}}
		v, reason := reqview.Read(r)
		if reason != reqview.OK {
			t.Fatalf("%s %s: refused %v", tc.method, tc.path, reason)
		}
		if got := l.Match(&v).Name; got != tc.want {
			t.Errorf("%s %s: route %s, want %s", tc.method, tc.path, got, tc.want)
		}
	}
}
