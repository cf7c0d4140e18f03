package e2e

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/rlproxytest"
)

// TestUpstreamHostAndHeaders: `host: upstream` reaches a virtual-host
// upstream that answers 404 to any other Host (as rlproxy's default `host:
// client` gets); a literal host is sent as written; request_headers adds
// a secret from set_env (its value never in the log) and removes a header;
// response_headers sets and removes; an https upstream whose certificate
// does not name the URL's host is reached with tls_server_name.
func TestUpstreamHostAndHeaders(t *testing.T) {
	t.Setenv("RLPROXY_E2E_API_KEY", "k3y-never-logged")
	vhost := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want := strings.TrimPrefix(r.URL.Path, "/")
		if r.URL.Path == "/" {
			want = strings.TrimPrefix(srvURL(r), "http://")
		}
		if r.Host != want {
			http.Error(w, "unknown Host "+r.Host, http.StatusNotFound)
			return
		}
		w.Header().Set("Server", "vhost/1")
		w.Header().Set("X-Api-Key-Seen", fmt.Sprint(r.Header.Get("X-Api-Key") == "k3y-never-logged"))
		w.Header().Set("X-Cookie-Seen", fmt.Sprint(r.Header.Get("Cookie") != ""))
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(vhost.Close)
	tlsUp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "tls ok") }))
	t.Cleanup(tlsUp.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsUp.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	// httptest's certificate names example.com and 127.0.0.1, not localhost.
	tlsURL := strings.Replace(tlsUp.URL, "127.0.0.1", "localhost", 1)
	var log netutil.LockedBuffer
	in := rlproxytest.Start(t, fmt.Sprintf(`
upstreams:
  client: { url: %[1]q }
  vhost:
    url: %[1]q
    host: upstream
    request_headers: { set_env: { X-Api-Key: RLPROXY_E2E_API_KEY }, remove: [cookie] }
    response_headers: { set: { X-Proxy: rlproxy }, remove: [server] }
  literal: { url: %[1]q, host: "named.example" }
  sni: { url: %[2]q, ca_file: %[3]q, tls_server_name: example.com }
  nosni: { url: %[2]q, ca_file: %[3]q }
routes:
  - { name: client, upstream: client, match: { path_prefix: /client } }
  - { name: literal, upstream: literal, match: { path_prefix: /named.example } }
  - { name: sni, upstream: sni, match: { path_prefix: /sni } }
  - { name: nosni, upstream: nosni, match: { path_prefix: /nosni } }
  - { name: vhost, upstream: vhost }
log: { level: debug }
`, vhost.URL, tlsURL, ca), rlproxytest.WithLog(&log))

	if resp, body := rlproxytest.Get(t, nil, in.URL+"/client"); resp.StatusCode != 404 {
		t.Errorf("host: client: %d %q, want the vhost's 404", resp.StatusCode, body)
	}
	resp, body := rlproxytest.Get(t, nil, in.URL+"/", "Cookie", "a=1")
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("host: upstream: %d %q, want 200 ok", resp.StatusCode, body)
	}
	if resp.Header.Get("X-Api-Key-Seen") != "true" || resp.Header.Get("X-Cookie-Seen") != "false" {
		t.Errorf("request_headers: key seen %q, cookie seen %q; want true, false", resp.Header.Get("X-Api-Key-Seen"), resp.Header.Get("X-Cookie-Seen"))
	}
	if resp.Header.Get("X-Proxy") != "rlproxy" || resp.Header.Get("Server") != "" {
		t.Errorf("response_headers: X-Proxy %q Server %q; want rlproxy, none", resp.Header.Get("X-Proxy"), resp.Header.Get("Server"))
	}
	if resp, body := rlproxytest.Get(t, nil, in.URL+"/named.example"); resp.StatusCode != 200 {
		t.Errorf("host: named.example: %d %q, want 200", resp.StatusCode, body)
	}
	if resp, body := rlproxytest.Get(t, nil, in.URL+"/sni"); resp.StatusCode != 200 || body != "tls ok" {
		t.Errorf("tls_server_name: %d %q, want 200", resp.StatusCode, body)
	}
	if resp, _ := rlproxytest.Get(t, nil, in.URL+"/nosni"); resp.StatusCode != 502 {
		t.Errorf("without tls_server_name: %d, want 502 (the certificate does not name localhost)", resp.StatusCode)
	}
	if strings.Contains(log.String(), "k3y-never-logged") {
		t.Error("the set_env secret appears in the log")
	}
}

// srvURL is the URL of the server that received r.
func srvURL(r *http.Request) string {
	return "http://" + r.Context().Value(http.LocalAddrContextKey).(fmt.Stringer).String()
}

// TestPoolHostUpstream: with host: upstream on a pool, each server gets its
// own host:port as Host (the rewrite runs before a server is picked, so the
// pool sets it per attempt): two virtual hosts that answer only their own
// name serve every request of a round robin.
func TestPoolHostUpstream(t *testing.T) {
	var urls [2]string
	for i := range urls {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Host != strings.TrimPrefix(srvURL(r), "http://") {
				http.Error(w, "unknown Host "+r.Host, http.StatusNotFound)
				return
			}
			fmt.Fprint(w, "ok")
		}))
		t.Cleanup(srv.Close)
		urls[i] = srv.URL
	}
	in := rlproxytest.Start(t, fmt.Sprintf(`
upstreams:
  app: { urls: [%q, %q], host: upstream }
routes: [{ name: r, upstream: app }]
`, urls[0], urls[1]))
	var codes []int
	for range 6 {
		resp, err := http.Get(in.URL + "/x")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	if fmt.Sprint(codes) != "[200 200 200 200 200 200]" {
		t.Fatalf("statuses %v, want 6 × 200 (each server its own Host)", codes)
	}
}
